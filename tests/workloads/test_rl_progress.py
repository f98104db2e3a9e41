"""Counting env runners that a preemption moved to another node, from the learner's runner
events (a runner Ray restarted on the node it was lost on does not count)."""

from __future__ import annotations

from typing import Any

from workloads.rl.experiment import runners_replaced


def _event(kind: str, runner: int, node: str) -> dict[str, Any]:
    return {"event": kind, "runner": runner, "node": node}


def test_a_runner_back_on_another_node_counts_once_per_loss() -> None:
    events = [_event("lost", 1, "a"), _event("lost", 2, "b"), _event("back", 2, "c"),
              _event("back", 1, "d"), _event("sampling", 1, "d"),
              _event("lost", 1, "d"), _event("back", 1, "e")]
    assert runners_replaced(events) == 3


def test_a_runner_back_on_its_own_node_or_never_lost_does_not_count() -> None:
    assert runners_replaced([_event("lost", 1, "a"), _event("back", 1, "a")]) == 0
    assert runners_replaced([_event("back", 1, "b")]) == 0  # a restart nothing saw fail
    assert runners_replaced([_event("lost", 1, "a")]) == 0  # not back yet
    assert runners_replaced([]) == 0
