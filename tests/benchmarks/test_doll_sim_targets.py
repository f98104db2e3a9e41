"""The simulator benchmarks' targets from their rows: each met or missed, and the exit code
says so (no run: rows by hand)."""

from __future__ import annotations

from typing import Any

from benchmarks import doll_cbl_check, doll_sim_agreement, doll_sim_speed
from benchmarks.report import exit_code


def test_a_start_point_two_percent_off_can_t_be_late_misses_the_cross_check() -> None:
    rows = [{"start": tick, "cbl_cost": 100.0, "cbl_rules_cost": 101.0,
             "cbl_finish_hours": 50.0, "cbl_rules_finish_hours": 50.5}
            for tick in range(10)]
    assert exit_code(doll_cbl_check.targets(rows)) == 0
    rows[3]["cbl_rules_cost"] = 97.9
    missed = [t.name for t in doll_cbl_check.targets(rows) if not t.met]
    assert missed == ["largest cost difference, any start point"]


def agreement_row(ratio: float, finish: float, met: tuple[bool, bool]) -> dict[str, Any]:
    lab = {"cost_ratio": 0.8, "finish_s": 50.0, "deadline_s": 52.5, "deadline_met": met[0]}
    sim = {"cost_ratio": 0.8 + ratio, "finish_s": 50.0 * (1 + finish), "deadline_met": met[1],
           "failed": None}
    return doll_sim_agreement.compare("t.json", 0, 0, "fallback", lab, sim)


def test_a_run_agrees_only_within_every_tolerance() -> None:
    assert agreement_row(0.02, 0.04, (True, True))["agrees"]
    assert not agreement_row(0.04, 0.0, (True, True))["agrees"]
    assert not agreement_row(0.0, -0.06, (True, True))["agrees"]
    assert not agreement_row(0.0, 0.0, (True, False))["agrees"]
    rows = [agreement_row(0.0, 0.0, (True, True)) for _ in range(9)]
    assert exit_code(doll_sim_agreement.targets([*rows, agreement_row(0.1, 0, (True, True))])) == 0
    assert exit_code(doll_sim_agreement.targets(
        [*rows[:8], *[agreement_row(0.1, 0, (True, True))] * 2])) == 1


def test_the_speed_targets_are_ratios_to_can_t_be_late_and_a_bound_on_large_runs() -> None:
    rows: list[dict[str, Any]] = [
        {"simulator": "Can't Be Late", "policy": "rc", "rules": "cant-be-late", "workers": 1,
         "runs_per_s": 100.0},
        {"simulator": "DOLL", "policy": "uniform-progress", "rules": "doll", "workers": 1,
         "runs_per_s": 350.0},
        {"simulator": "DOLL", "policy": "fallback", "rules": "doll", "workers": 1,
         "runs_per_s": 290.0},
        {"simulator": "DOLL", "policy": "fallback", "rules": "doll", "workers": 1024,
         "runs_per_s": 2.0, "slowest_run_s": 0.6},
        {"growth": 1, "cpu_per_decision_us": 10.0, "workers": 1},
        {"growth": 10, "cpu_per_decision_us": 12.0, "workers": 1},
    ]
    checked = doll_sim_speed.targets(rows)
    assert [t.met for t in checked] == [True, False, True, True]
