"""Reading a burst results folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LAB_BANDWIDTH = "100"
"""The bandwidth the burst lab tests run at (the seed's 100m profile: 106 Mbit/s)."""


def read_summary(folder: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((folder / "summary.json").read_text())
    return summary


def read_tasks(folder: Path, scheduler: str) -> list[dict[str, Any]]:
    lines = (folder / "records" / f"tasks_{scheduler}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]
