"""`invoke run-elastic` exactly as docs/elastic.md shows it (only `--out` added): a fresh spot
lab, the shipped digits CNN on up to 4 workers, the default preemption schedule. The run
shows the system: at least 3 preemptions, each notice honoured (the checkpoint of the step
the ranks were on committed by Ray Train before the node's deadline), no step computed
twice, the test accuracy reached; priced from the lab's record, drawn.

And the docs' "your script" command: examples/elastic/ray_train_mlp_spot.py (an ordinary Ray
Train script with the lines that call `checkpoint_due()`) loses no step through three
preemptions, one of them while a worker group starts, every notice honoured; Ray Train's
own log lines went to the run's ray-traces.log, not the terminal, and no traceback of the
ranks' hand-offs is in either."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.helpers.acceptance import run_documented_on_a_new_lab
from workloads.elastic.options import DEMO_SCHEDULE
from workloads.elastic.schedule import parse_schedule

pytestmark = [pytest.mark.ray, pytest.mark.subprocess, pytest.mark.slow]

COMMAND = "invoke run-elastic"
OWN_SCRIPT = ("invoke run-elastic -f examples/elastic/ray_train_mlp_spot.py --function train_func "
              "--preempt-at 4s,start,4s -- --epochs 20 --samples 12000")
TIMEOUT_S = 1500.0
"""A loaded 2-core machine."""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    summary, out = run_documented_on_a_new_lab(COMMAND, tmp_path_factory, "elastic",
                                               TIMEOUT_S)
    records = {path.stem: [json.loads(row) for row in path.read_text().splitlines()]
               for path in (out / "records").glob("*.jsonl")}
    return {"summary": summary, "records": records, "out": out}


def test_the_default_run_shows_preemptions_that_lose_nothing(run: dict[str, Any]) -> None:
    summary = run["summary"]
    assert summary["preemptions"] >= 3, summary["restarts"]
    assert summary["notices"] >= 3
    assert summary["notices_honoured"] == summary["notices"], summary["notice_details"]
    assert summary["lost_steps"] == 0
    assert summary["completed"] and summary["steps_done"] == summary["total_steps"]
    assert summary["final_metrics"]["test_accuracy"] >= 0.95


def test_each_notice_checkpoint_was_committed_before_its_deadline_and_resumed_from(
        run: dict[str, Any]) -> None:
    summary, records = run["summary"], run["records"]
    saved = [n for n in summary["notice_details"] if n["checkpoint_step"] is not None]
    assert saved
    for notice in saved:
        assert notice["t"] <= notice["reported"] <= notice["committed"] <= notice["deadline"]
        after = [r for r in summary["restarts"] if r["attempt"] > notice["attempt"]][0]
        assert after["resumed_from_step"] == notice["checkpoint_step"]
    carried = summary["preemptions_carried_out"]
    assert len(carried) == len(parse_schedule(DEMO_SCHEDULE))
    assert {row["node"] for row in carried} <= {
        e["node"] for e in (json.loads(line) for line in
                            (run["out"] / "spotlab" / "events.jsonl").read_text().splitlines())
        if e["event"] == "notice"}
    assert [row["point"] for row in records["schedule"]] == DEMO_SCHEDULE.split(",")


def test_the_run_is_priced_below_all_on_demand_and_drawn(run: dict[str, Any]) -> None:
    cost = run["summary"]["cost"]
    assert 0 < cost["cost_usd"] < cost["all_on_demand_cost_usd"]
    assert (run["out"] / "elastic.png").stat().st_size > 10_000
    assert json.loads((run["out"] / "provenance.json").read_text())["parameters"][
        "preempt_at"] == DEMO_SCHEDULE


def test_your_own_script_as_the_docs_show_it_loses_no_step(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    summary, out = run_documented_on_a_new_lab(OWN_SCRIPT, tmp_path_factory, "elastic-own",
                                               TIMEOUT_S)
    assert summary["completed"] and summary["step_unit"] == "step"
    assert len(summary["preemptions_carried_out"]) == 3 and summary["preemptions"] >= 3
    assert summary["lost_steps"] == 0
    assert summary["notices"] >= 3 and summary["notices_honoured"] == summary["notices"], \
        summary["notice_details"]
    assert summary["notices_during_startup"] >= 1, summary["notice_details"]
    saved = [n for n in summary["notice_details"] if n["checkpoint_step"] is not None]
    assert saved and all(n["committed"] <= n["deadline"] for n in saved)
    assert summary["final_metrics"]["accuracy"] > 0.9
    # the workers' lines are kept, in the file; the designed hand-off leaves no traceback
    ray_lines = (out / "ray-traces.log").read_text()
    assert "(RayTrainWorker" in ray_lines
    assert "NoticeHandoff" not in ray_lines
    parameters = json.loads((out / "provenance.json").read_text())["parameters"]
    assert parameters["preempt_at"] == "4s,start,4s"
