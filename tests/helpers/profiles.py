"""Seed-format (networkx node-link) profile documents for the network-emulation tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
