"""The headline table a run task ends with: read from the run's summary.json as each workload
writes it, one row per item, a missing value as `-`, never an error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from launch.headline import HEADLINES, MISSING, headline_of, render_headline

DOLL = {"policies": {
    "on-demand": {"cost_ratio": 1.0, "deadline_met": True, "finish_s": 50.2, "deadline_s": 60.0,
                  "preemptions": 0, "accuracy": 0.931},
    "static": {"cost_ratio": 0.4123, "deadline_met": False, "finish_s": 61.0,
               "deadline_s": 60.0, "preemptions": 7, "accuracy": 0.92},
}}
BURST = {"lower_bound_s": 40.0, "speedup": 1.314, "runs": {
    "default": {"makespan_s": 60.0, "makespan_over_bound": 1.5, "tasks_on_cloud": 10},
    "data-aware": {"makespan_s": 45.66, "makespan_over_bound": 1.14, "tasks_on_cloud": 21},
}}
INFERENCE = {
    "throughput_qps": 812.4,
    "rate_spread_after_window": {"samples": 30, "median": 1.012, "max": 1.15},
    "failures_seen": {"workers_killed": 2, "coordinator_killed": True},
    "exactly_once": {"ok": True, "jobs": {
        "small": {"answered": 45000, "queries": 45000, "lost": 0, "duplicated": 0, "ok": True},
        "large": {"answered": 45000, "queries": 45000, "lost": 0, "duplicated": 0, "ok": True},
    }},
}
ELASTIC = {"steps_done": 300, "total_steps": 300, "lost_steps": 0, "preemptions": 3,
           "notices": 3, "notices_honoured": 3,
           "cost": {"cost_usd": 0.00123, "all_on_demand_cost_usd": 0.0031}}
RL = {"env_steps": 4000, "last_eval_return": -250.25, "best_eval_return": -201.0,
      "preemptions": 2, "env_runners_replaced": 2, "cost": 0.002, "all_on_demand_cost": 0.004}


def _cells(table: str) -> list[list[str]]:
    return [[cell for cell in line.split("  ") if cell.strip()] for line in table.splitlines()]


def test_doll_shows_each_policys_cost_ratio_deadline_and_preemptions() -> None:
    rows = _cells(render_headline("doll", DOLL))
    assert [cell.strip() for cell in rows[0]] == [
        "policy", "cost ratio", "deadline met", "finish", "deadline", "preemptions", "accuracy"]
    assert [cell.strip() for cell in rows[2]] == [
        "static", "0.412", "NO", "61.0 s", "60.0 s", "7", "0.920"]
    assert len(rows) == 3


def test_burst_shows_the_makespans_against_the_bound_and_the_speedup() -> None:
    table = render_headline("burst", BURST)
    assert "data-aware" in table and "45.7 s" in table and "1.14x" in table
    assert table.splitlines()[-1].split() == ["speedup", "(default", "/", "data-aware)", "1.31x"]


def test_inference_shows_each_job_answered_once_and_the_rate_spread() -> None:
    table = render_headline("inference", INFERENCE)
    assert "45000/45000" in table
    assert "median 1.012, max 1.150" in table and "812 queries/s" in table
    assert any(line.split()[-1] == "yes" and line.startswith("every query answered")
               for line in table.splitlines())


@pytest.mark.parametrize(("workload", "summary", "shown"), [
    ("elastic", ELASTIC, ["300/300", "3/3", "$0.0012"]),
    ("rl", RL, ["-250.2", "4000", "$0.0040"]),
])
def test_single_values_are_one_line_each(workload: str, summary: dict[str, Any],
                                         shown: list[str]) -> None:
    table = render_headline(workload, summary)
    assert len(table.splitlines()) == len(HEADLINES[workload].values)
    for text in shown:
        assert text in table, (text, table)


@pytest.mark.parametrize("workload", sorted(HEADLINES))
def test_a_summary_without_the_numbers_still_renders(workload: str) -> None:
    table = render_headline(workload, {"runs": {"x": {}}, "policies": {"p": None, "q": {}},
                                       "exactly_once": {"jobs": {"j": {}}}, "cost": "odd"})
    assert table and MISSING in table


def test_a_folder_without_a_summary_has_no_headline(tmp_path: Path) -> None:
    assert headline_of("doll", tmp_path) == ""
    (tmp_path / "summary.json").write_text(json.dumps(DOLL))
    assert headline_of("doll", tmp_path) == render_headline("doll", DOLL)
