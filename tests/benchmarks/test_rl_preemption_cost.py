"""The RL benchmark's arithmetic: each preemption's phases from the lab's and the learner's
events, the capacity it removed, the bound and the split of the extra wall time."""

from __future__ import annotations

import pytest

from benchmarks.rl_scaling import compare, phases

LAB = [{"event": "notice", "node": "spot-1", "t": 100.0},
       {"event": "kill", "node": "spot-1", "t": 106.0},
       {"event": "notice", "node": "spot-0", "t": 200.0},
       {"event": "kill", "node": "spot-0", "t": 206.0}]
INJECTED = [{"kind": "preempt", "node": "spot-1", "ray_node_id": "bb", "after_iteration": 8},
            {"kind": "preempt", "node": "spot-0", "ray_node_id": "aa", "after_iteration": 16}]


def test_each_preemption_is_split_into_its_phases() -> None:
    events = [
        {"event": "lost", "runner": 2, "node": "bb", "epoch": 107.5},
        {"event": "back", "runner": 2, "node": "cc", "epoch": 118.0},
        {"event": "sampling", "runner": 2, "node": "cc", "epoch": 119.0, "dispatched": 118.2},
        {"event": "lost", "runner": 1, "node": "aa", "epoch": 206.5},
    ]
    first, second = phases(events, LAB, INJECTED, run_end=300.0)
    assert first["drain"] == 6.0 and first["detection"] == 1.5
    assert first["restart"] == 10.5
    assert first["restore"] == pytest.approx(0.2) and first["warm-up"] == pytest.approx(0.8)
    assert first["capacity_removed_s"] == 13.0  # kill to its first fragment after
    # never back before the run ended: capacity removed until the end, no later phases
    assert second["detection"] == 0.5 and "restart" not in second
    assert second["capacity_removed_s"] == 94.0


def test_a_preemption_the_learner_never_saw_has_no_phases() -> None:
    [row] = phases([], LAB, INJECTED[:1], run_end=300.0)
    assert row == {"node": "spot-1", "after_iteration": 8}


def test_the_ratio_the_bound_and_where_the_extra_time_went() -> None:
    without = {"wall_time_s": 200.0, "learner_update_s": 150.0, "learner_wait_s": 10.0}
    with_ = {"wall_time_s": 220.0, "learner_update_s": 162.0, "learner_wait_s": 12.0,
             "phases": [{"capacity_removed_s": 30.0}, {"capacity_removed_s": 10.0}, {}]}
    compared = compare(without, with_, runners=2)
    assert compared["ratio"] == pytest.approx(1.1)
    assert compared["bound"] == pytest.approx(1 + 40.0 / (2 * 200.0))
    assert compared["extra_s"] == pytest.approx(
        {"wall_time_s": 20.0, "learner_update_s": 12.0, "learner_wait_s": 2.0, "other_s": 6.0})
