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
