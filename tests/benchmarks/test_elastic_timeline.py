"""benchmarks.elastic_preemption's accounting on hand-made records: where a preemption's time
went (detection, drain, restart, restore, warm-up, redo) and the bound it is held to."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.elastic_preemption import WARM_UP_STEPS, bound, bound_parts, timeline


def steps(attempt: int, first: int, count: int, t0: float, gap: float) -> list[dict[str, Any]]:
    return [{"attempt": attempt, "step": first + i, "t": t0 + i * gap, "rank": 0}
            for i in range(count)]


def test_a_preemption_split_into_its_parts() -> None:
    # group 0: 4 workers, steps 0..49 every 0.1 s from t=10; interrupted at t=15.0, notice
    # seen at 15.5, notice checkpoint committed at 16.0 (50 steps); group 1 (3 workers)
    # begins at 26.0, its first step at 30.0 (steady 0.2 s), resumed from 50 steps
    records = {
        "attempts": [{"attempt": 0, "t": 9.0, "world_size": 4, "resumed_steps": 0},
                     {"attempt": 1, "t": 26.0, "world_size": 3, "resumed_steps": 50}],
        "steps": steps(0, 0, 50, 10.0, 0.1) + steps(1, 50, 30, 30.0, 0.2),
        "notices": [{"attempt": 0, "t": 15.5}],
        "commits": [{"t": 16.0, "checkpoint": "c50"}, {"t": 12.0, "checkpoint": "c10"}],
    }
    found = timeline(records, [15.0])
    [part] = found["preemptions"]
    assert part["detection"] == pytest.approx(0.5)
    assert part["drain"] == pytest.approx(0.5)
    assert part["restart"] == pytest.approx(10.0)
    assert part["restore"] == pytest.approx(4.0 - 0.2)
    assert part["warm_up"] == pytest.approx(0.0)
    assert part["redo"] == 0
    assert [g["workers"] for g in found["groups"]] == [4, 3]
    assert found["groups"][1]["steady_step_s"] == pytest.approx(0.2)

    # the same run without the notice checkpoint: resumed from 10 steps, 40 computed again
    records["attempts"][1]["resumed_steps"] = 10
    records["commits"] = records["commits"][1:]
    [ignored] = timeline(records, [15.0])["preemptions"]
    assert ignored["drain"] == 0 and ignored["restart"] == pytest.approx(10.5)
    assert ignored["redo"] == pytest.approx(40 * 0.2)

    # the reference: one group of 4 at 0.1 s a step, 2 s from its start to its first step;
    # the 30 steps at 3 workers cost 0.1 s more each, plus one restore
    none = {"wall_time_s": 100.0, "timeline": timeline(
        {"attempts": [{"attempt": 0, "t": 8.0, "world_size": 4}],
         "steps": steps(0, 0, 80, 10.0, 0.1)}, [])}
    row = {"wall_time_s": 110.0, "timeline": found}
    capacity, restores = bound_parts(none, row) or (0.0, 0.0)
    assert capacity == pytest.approx(30 * 0.1) and restores == pytest.approx(2.0)
    assert bound(none, row) == pytest.approx(105.0)


def test_warm_up_is_the_first_steps_past_their_steady_time() -> None:
    slow = [{"attempt": 1, "step": 50 + i, "t": 30.0 + i * 1.0, "rank": 0}
            for i in range(WARM_UP_STEPS)]
    after = steps(1, 50 + WARM_UP_STEPS, 20, 30.0 + WARM_UP_STEPS * 1.0, 0.2)
    records = {
        "attempts": [{"attempt": 0, "t": 0.0, "world_size": 2, "resumed_steps": 0},
                     {"attempt": 1, "t": 29.0, "world_size": 1, "resumed_steps": 50}],
        "steps": steps(0, 0, 50, 1.0, 0.1) + slow + after,
        "notices": [{"attempt": 0, "t": 20.0}], "commits": [],
    }
    [part] = timeline(records, [20.0])["preemptions"]
    assert part["warm_up"] == pytest.approx((WARM_UP_STEPS - 1) * (1.0 - 0.2))


def test_survivor_mode_rates_and_bound_from_its_records() -> None:
    from argparse import Namespace

    from benchmarks.elastic_preemption import survivor_bound, survivor_row

    def reports(group: int, first: int, count: int, t0: float, gap: float
                ) -> list[dict[str, Any]]:
        return [{"replica_group": group, "step": first + i, "t_run": t0 + i * gap,
                 "loss": 0.5} for i in range(count)]

    # 2 groups step every 0.2 s from t=0; group 1 noticed at 10.0 (step 50), gone; group 0
    # steps every 0.1 s alone from 10.0 until the replacement's first step at 20.0 (step 150)
    counts = [{"t": -1.0, "workers": 2}, {"t": 10.5, "workers": 1}, {"t": 19.0, "workers": 2}]
    steps = (reports(0, 0, 50, 0.0, 0.2) + reports(1, 0, 50, 0.0, 0.2)
             + reports(0, 50, 100, 10.0, 0.1) + reports(2, 150, 50, 20.0, 0.2)
             + reports(0, 150, 50, 20.0, 0.2))
    summary = {"started_at": 0.0, "wall_time_s": 30.0, "preemptions": 1, "lost_steps": 0,
               "preemption_schedule": [{"steps_done": 50}], "worker_counts": counts,
               "final_metrics": {"accuracy": 0.9},
               "replacements": [{"replica_group": 1, "replacement_group": 2, "notice_t": 10.0,
                                 "leave_t": 10.5, "node_joined_t": 18.0, "join_t": 19.0,
                                 "rejoin_t": 20.0, "survivor_steps": 100}]}
    args = Namespace(rate_window=10.0, loss_window=30)
    row = survivor_row("torchft", summary, {"steps": steps}, args)
    [rep] = row["replacements"]
    assert rep["rate_before"] == pytest.approx(5.1)  # steps 0..50 (t 0..10.0) in 10 s
    assert rep["rate_during"] == pytest.approx(10.0)
    assert rep["survivor_rate_ratio"] == pytest.approx(10.0 / 5.1)
    assert rep["node_join_to_first_step_s"] == pytest.approx(2.0)
    assert row["steady_step_s"]["1"] == pytest.approx(0.1)
    none = {"wall_time_s": 25.0, "steady_step_s": {"2": 0.2}}
    # the 85 steps done while one group was up (t 10.5..18.9) were 0.1 s quicker each
    assert row["steps_by_count"]["1"] == 85
    assert survivor_bound(none, row) == pytest.approx(25.0 - 85 * 0.1)


def test_survivor_mode_compares_the_mean_final_loss_over_its_seeds() -> None:
    from benchmarks.elastic_preemption import LOSS_TARGET, survivor_targets

    def row(mode: str, seed: int, loss: float) -> dict[str, Any]:
        return {"mode": mode, "seed": seed, "final_loss": loss, "preemptions": 3,
                "lost_steps": 0, "replacements": [], "wall_time_s": 10.0,
                "steady_step_s": {"5": 0.1}, "steps_by_count": {"5": 100}}

    # each pair alone is 20 % apart, in opposite directions; their means agree
    rows = [row("torchft-none", 0, 0.020), row("torchft-none", 1, 0.030),
            row("torchft", 0, 0.024), row("torchft", 1, 0.026)]
    [loss] = [t for t in survivor_targets(rows) if "final loss" in t.name]
    assert "over 2 seed(s)" in loss.name
    assert loss.measured == pytest.approx(0.0) and loss.measured <= LOSS_TARGET
    walls = [t for t in survivor_targets(rows) if "wall time" in t.name]
    assert [t.name.split(":")[0] for t in walls] == ["survivor mode, seed 0",
                                                     "survivor mode, seed 1"]
