"""The DOLL benchmark's targets from its rows: each met or missed, and the exit code says so."""

from __future__ import annotations

from typing import Any

from benchmarks.doll_cost import targets
from benchmarks.report import exit_code


def row(product: str, policy: str, seed: int, ratio: float, met: bool,
        probability: float = 0.9, bound: float = 0.8) -> dict[str, Any]:
    return {"product": product, "policy": policy, "seed": seed, "cost_ratio": ratio,
            "deadline_met": met, "deadline_probability": probability, "cost_bound": bound}


def good_rows(product: str) -> list[dict[str, Any]]:
    return [
        *(row(product, "static", seed, 0.9, seed != 3, probability=0.947) for seed in range(10)),
        *(row(product, "adaptive", seed, 0.82, True) for seed in range(10)),
        *(row(product, "adaptive-paper", seed, 0.81, seed % 3 != 0) for seed in range(10)),
        *(row(product, "fallback", seed, 0.6, True) for seed in range(10)),
    ]


def test_runs_that_keep_their_promises_meet_every_target() -> None:
    checked = targets(good_rows("SUSE Linux") + good_rows("Linux/UNIX"))
    assert len(checked) == 10 and all(target.met for target in checked)
    assert exit_code(checked) == 0


def test_each_broken_promise_is_a_missed_target_and_a_failing_exit_code() -> None:
    rows = good_rows("SUSE Linux") + good_rows("Linux/UNIX")
    for r in rows:
        if r["product"] == "Linux/UNIX" and r["policy"] == "static" and r["seed"] < 4:
            r["deadline_met"] = False  # 6/10 against a promised 0.947
        if r["product"] == "SUSE Linux" and r["policy"] == "fallback" and r["seed"] == 0:
            r["deadline_met"] = False
    missed = [target.name for target in targets(rows) if not target.met]
    assert missed == ["SUSE $0.286 fallback deadlines met",
                      "Linux/UNIX $0.186 static: deadlines met"]
    assert exit_code(targets(rows)) == 1


def test_the_preemption_table_sets_each_policy_beside_the_same_seeds_run_without() -> None:
    from benchmarks.doll_cost import preemption_table
    from workloads.doll.options import DollOptions

    def finished(policy: str, seed: int, finish: float, lost: float | None,
                 preemptions: int = 0) -> dict[str, Any]:
        return {"product": "SUSE Linux", "policy": policy, "seed": seed, "finish_s": finish,
                "stream_lost_fleet_s": lost, "preemptions": preemptions}

    rows = [finished("on-demand", 0, 50.0, 0.0), finished("on-demand", 1, 52.0, 0.0),
            finished("static", 0, 53.0, 2.0, 10), finished("static", 1, 55.0, 2.0, 12),
            finished("static", 2, 90.0, 2.0, 30),  # no run without for seed 2: left out
            finished("fallback", 0, 50.5, None)]  # not counted (a worker lost): left out
    text = preemption_table(rows, DollOptions(policies=("on-demand", "static", "fallback")))
    [static] = [line for line in text.splitlines() if "| static |" in line]
    # without 51, with 54, ratio 54/51; bound (51 + 2)/51; extra 3 = 2 lost + 1 other
    assert static == ("| SUSE $0.286 | static | 11.0 | 51.0 | 54.0 | 1.059 | 1.039 | 1.019 "
                      "| 3.0 | 2.0 | 1.0 |")
    assert "fallback" not in text.split("|---|")[-1] and "| on-demand |" not in text


def test_the_best_policy_is_held_against_uniform_progress_on_every_trace() -> None:
    from benchmarks.doll_cost import baseline_table, baseline_targets

    capacity = "us-east-2b_v100_1.json (SUSE prices)"
    rows = [
        *(row("SUSE $0.286", "fallback", seed, 0.54, seed != 0) for seed in range(10)),
        *(row("SUSE $0.286", "uniform-progress", seed, 0.7, True) for seed in range(10)),
        *(row(capacity, "fallback", seed, 0.8, True) for seed in range(5)),
        *(row(capacity, "uniform-progress", seed, 0.75, True) for seed in range(5)),
        {"product": capacity, "policy": "Mine", "seed": 0, "failed": "policy Mine failed"},
    ]
    checked = {target.name: target.met for target in baseline_targets(rows, 0.55)}
    assert checked == {
        "SUSE $0.286 fallback: deadlines met": True,  # 9/10
        "SUSE $0.286 fallback: cost ratio to on-demand": True,
        "SUSE $0.286 fallback − uniform-progress: cost ratio": True,
        f"{capacity} fallback: deadlines met": True,
        f"{capacity} fallback − uniform-progress: cost ratio": False,  # 0.8 against 0.75
    }
    rows[1]["deadline_met"] = False  # 8/10
    missed = [t.name for t in baseline_targets(rows, 0.55) if not t.met]
    assert "SUSE $0.286 fallback: deadlines met" in missed
    table = baseline_table(rows)
    assert f"| {capacity} | fallback | 0.800 | 5/5 | 0.750 | 5/5 | +0.050 |" in table

    assert "SUSE $0.286 fallback: cost ratio to on-demand" in [
        t.name for t in baseline_targets(rows, 0.53) if not t.met]  # 0.54 over 0.53


def test_the_suse_ceiling_is_0_55_unless_the_price_floor_leaves_no_room_under_it() -> None:
    from benchmarks.doll_cost import FLOOR_MARGIN, SUSE_CEILING, TRACES, price_floor, suse_ceiling
    from workloads.doll.options import DollOptions

    base = DollOptions()
    floor = price_floor(base, *TRACES[0])
    assert 0.5 < floor < 0.6  # the SUSE trace's spot price over the deadline: about 0.55
    assert suse_ceiling(base) == max(SUSE_CEILING, FLOOR_MARGIN * floor)
    assert suse_ceiling(base) > floor
