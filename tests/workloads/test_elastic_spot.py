"""Elastic training on a real spot lab (the on-demand head and one spot node, one CPU each):
the spot node is interrupted mid-training; its worker sees the notice, the run checkpoints at
that step before the node's deadline, shrinks to the node left, resumes from that checkpoint
and finishes with every step computed exactly once; the run is priced from the lab's record."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.elastic_preemption import run_with_interrupts
from spotlab import SpotLab, SpotLabConfig, spot_lab
from spotlab.state import STATE_DIR_ENV
from workloads.elastic.cost import price_run

pytestmark = [pytest.mark.ray, pytest.mark.slow]

STEPS = 120
INTERRUPT_AT_STEP = 20
LAB = SpotLabConfig(spot=1, on_demand=0, head_cpus=1, cpus_per_node=1, alpha=1.0,
                    warning_s=4.0, replace_delay_s=600.0, object_store_mb=80, dashboard=False)
"""α = 1: no chain preemption, the test interrupts spot-0 itself; no replacement comes. The
head's CPU is the on-demand one (no separate on-demand node: one node fewer to start)."""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpotLab]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_DIR_ENV, str(tmp_path_factory.mktemp("spotlab-state")))
        with spot_lab(LAB) as running:
            yield running


@pytest.fixture(scope="module")
def run(lab: SpotLab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("elastic") / "results"
    code, log, interrupted = run_with_interrupts(lab, out, [
        "-m", "2", "--cluster-rescale-timeout", "600", "--notice-poll", "0.2", "--",
        "--steps", str(STEPS), "--step-time", "0.05", "--eval-every", "60"],
        interrupt_at=[INTERRUPT_AT_STEP], timeout_s=420)
    assert code == 0, "\n".join(log[-60:])
    assert len(interrupted) == 1, "\n".join(log[-60:])
    summary = json.loads((out / "summary.json").read_text())
    records = {path.stem: [json.loads(row) for row in path.read_text().splitlines()]
               for path in (out / "records").glob("*.jsonl")}
    return {"summary": summary, "records": records, "events": lab.events(),
            "interrupted_after": interrupted[0],
            "provenance": json.loads((out / "provenance.json").read_text())}


def test_every_step_done_once_across_the_preemption(run: dict[str, Any]) -> None:
    summary, steps = run["summary"], run["records"]["steps"]
    assert summary["completed"] and summary["lost_steps"] == 0
    assert sorted(row["step"] for row in steps) == list(range(STEPS))
    assert summary["preemptions"] == 1 and summary["notices_honoured"] == summary["notices"] == 1
    assert summary["final_metrics"]["test_accuracy"] >= 0.9


def test_checkpoint_at_the_notice_before_the_deadline_and_resumed_from(
        run: dict[str, Any]) -> None:
    [restart] = run["summary"]["restarts"]
    records, events = run["records"], run["events"]
    notice_event = next(e for e in events if e["event"] == "notice" and e["node"] == "spot-0")
    kill = next(e for e in events if e["event"] == "kill" and e["node"] == "spot-0")
    [saved] = [c for c in records["checkpoints"] if c["reason"] == "notice"]
    seen = [n for n in records["notices"] if n["source"] == "imds" and not n.get("agreed")]
    assert {n["node_id"] for n in seen} == {notice_event["ray_node_id"]}  # its own node's
    assert notice_event["t"] <= min(n["t"] for n in seen) < saved["t"] < kill["t"]
    assert saved["step"] >= run["interrupted_after"] - 1  # no earlier than the notice
    assert restart["cause"] == "preemption"
    assert restart["resumed_from_step"] == saved["step"] == restart["last_step_before"]
    assert (restart["workers_before"], restart["workers_after"]) == (2, 1)
    second = [row for row in records["steps"] if row["attempt"] == restart["attempt"]]
    assert second[0]["step"] == saved["step"] + 1 and second[0]["world_size"] == 1
    assert run["provenance"]["inputs"]["script"]["file"] == "digits_cnn.py"


def test_priced_from_the_lab_record_below_all_on_demand(run: dict[str, Any]) -> None:
    summary = run["summary"]
    priced = price_run(LAB, run["events"], summary["started_at"], summary["ended_at"])
    # the head all along, spot-0 until its kill: cheaper than two on-demand nodes
    assert 0 < priced["cost_usd"] < priced["all_on_demand_cost_usd"]
    assert 0 < priced["spot_up_node_s"] < summary["wall_time_s"]
    assert priced["on_demand_node_s"] == pytest.approx(summary["wall_time_s"])
    assert summary["throughput_steps_per_s"].keys() <= {"1", "2"}
