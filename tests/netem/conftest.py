"""Fixtures for the network-emulation tests: seed-format profile files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

NODES = ("Cloud", "HPCLogin", "HPCWorker")


def condition(bandwidth: float, rtt: float = 0.3, jitter: float = 0.01,
              loss: float = 0) -> dict[str, Any]:
    return {"rtt": [rtt, 0], "bandwidth": [bandwidth, 0], "jitter": [jitter, 0],
            "loss": [loss, 0]}


def document(bandwidth: float, **values: float) -> dict[str, Any]:
    cross = condition(bandwidth, **values)
    pairs = [("Cloud", "HPCLogin"), ("Cloud", "HPCWorker"), ("HPCLogin", "Cloud"),
             ("HPCWorker", "Cloud")]
    return {
        "directed": True,
        "multigraph": False,
        "graph": {},
        "nodes": [{"id": node} for node in NODES],
        "links": [{"source": s, "target": t, "condition": dict(cross)} for s, t in pairs]
        + [{"source": "HPCLogin", "target": "HPCWorker", "condition": condition(900)}],
    }


def write_profile(directory: Path, bandwidth: float = 40, name: str = "mine",
                  **values: float) -> Path:
    path = directory / f"{name}.json"
    path.write_text(json.dumps(document(bandwidth, **values)))
    return path


def write_document(directory: Path, doc: Any, name: str = "bad") -> Path:
    path = directory / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def profile_file(tmp_path: Path) -> Callable[..., Path]:
    """Write a seed-format profile (cross-site bandwidth and values given) and return its path."""

    def write(bandwidth: float = 40, name: str = "mine", **values: float) -> Path:
        return write_profile(tmp_path, bandwidth, name, **values)

    return write


@pytest.fixture
def seed_document() -> Callable[[], dict[str, Any]]:
    """A fresh valid seed-format document (40 Mbit/s across the sites) on every call."""
    return lambda: document(40)


@pytest.fixture
def document_file(tmp_path: Path) -> Callable[[Any], Path]:
    """Write any JSON document as a profile file and return its path."""

    def write(doc: Any) -> Path:
        return write_document(tmp_path, doc)

    return write
