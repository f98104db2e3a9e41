"""Fixtures for the burst tests that need the real two-site lab."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from netem.lab import LabDescription, two_site_lab
from netem.lab.netns import netns_supported
from netem.profile import load_profile

BANDWIDTH = "100"
needs_netns = pytest.mark.skipif(
    not netns_supported()[0], reason=f"netns lab unavailable: {netns_supported()[1]}"
)


@pytest.fixture(autouse=True)
def private_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lab state files of these tests stay out of the user's /run/spotburst/labs."""
    monkeypatch.setenv("SPOTBURST_LAB_STATE_DIR", str(tmp_path_factory.getbasetemp() / "labs"))


@pytest.fixture(scope="module")
def shared_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabDescription]:
    """One netns lab for a module's tests (removed at the end, whatever happened)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("SPOTBURST_LAB_STATE_DIR", str(tmp_path_factory.getbasetemp() / "labs"))
    try:
        with two_site_lab(
            load_profile(bw=BANDWIDTH), kind="netns", progress=lambda message: None
        ) as lab:
            yield lab
    finally:
        mp.undo()


def read_summary(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "summary.json").read_text())


def read_tasks(folder: Path, scheduler: str) -> list[dict[str, Any]]:
    lines = (folder / "records" / f"tasks_{scheduler}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]
