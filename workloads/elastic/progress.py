"""The lines the elastic driver prints while it runs, made and read here only: people read
them in the job's log; the launcher reads the preemption requests among them and interrupts
the node named (on a spot lab; see launch/elastic.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

PREFIX = "elastic:"
_PREEMPT = re.compile(rf"{PREFIX} preemption (\d+)/(\d+) \(([^)]*)\): interrupt node "
                      r"([0-9a-f]+) ")


@dataclass(frozen=True)
class PreemptRequest:
    index: int  # 1-based
    of: int
    point: str
    node_id: str


def preempt_line(index: int, of: int, point: str, node_id: str, holder: str,
                 steps_done: int) -> str:
    """`holder`: what runs on the node ("worker group 4", "replica group 3")."""
    return (f"{PREFIX} preemption {index}/{of} ({point}): interrupt node {node_id} "
            f"({holder}, {steps_done} steps done)")


def preempt_request(line: str) -> PreemptRequest | None:
    """The request a line carries, if it is one (the job's log prefixes nothing to it)."""
    found = _PREEMPT.search(line)
    if found is None:
        return None
    return PreemptRequest(int(found[1]), int(found[2]), found[3], found[4])


def group_line(group: dict[str, Any], resumed_steps: int | None) -> str:
    resumed = f", resuming after step {resumed_steps}" if resumed_steps else ""
    return f"{PREFIX} worker group {group['group']} placed: {group['world_size']} workers{resumed}"


def step_line(progress: dict[str, Any]) -> str:
    last = progress["last"]
    total = progress["total_steps"]
    loss = f", loss {last['loss']:.4f}" if "loss" in last else ""
    return (f"{PREFIX} step {progress['steps_done']}/{total if total else '?'} on "
            f"{last['world_size']} workers (group {last['attempt']}, {progress['notices']} "
            f"notices, {progress['checkpoints']} checkpoints){loss}")
