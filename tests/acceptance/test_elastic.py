"""`invoke run-elastic` exactly as docs/elastic.md shows it (only `--out` added): a fresh spot
lab, the shipped digits CNN on up to 4 workers, the default preemption schedule. The run
shows the system: at least 3 preemptions, each notice honoured (the checkpoint of the step
the ranks were on committed by Ray Train before the node's deadline), no step computed
twice, the test accuracy reached; priced from the lab's record, drawn."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spotlab.state import STATE_DIR_ENV
from tests.helpers.acceptance import run_documented
from workloads.elastic.options import DEMO_SCHEDULE
from workloads.elastic.schedule import parse_schedule

pytestmark = [pytest.mark.ray, pytest.mark.subprocess, pytest.mark.slow]

COMMAND = "invoke run-elastic"
TIMEOUT_S = 1500.0
"""A loaded 2-core machine."""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("elastic") / "results"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_DIR_ENV, str(tmp_path_factory.mktemp("spotlab-state")))
        summary = run_documented(COMMAND, out, timeout_s=TIMEOUT_S)
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
