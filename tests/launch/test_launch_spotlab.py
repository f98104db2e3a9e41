"""A spot workload's local default: a new spot lab per run, the workload a Ray Job on the
lab's dashboard with the lab's token, results back through the log, the lab's config and
events kept beside them, and nothing of the lab left afterwards."""

import json
from pathlib import Path

import pytest

from launch.targets import LAB_RECORD, run_workload
from launch.workload import WorkloadRun
from spotlab import SpotLabConfig, recorded_lab_ids
from spotlab.report import preemption_records
from tests.helpers.doll import TINY_DOLL_ARGS

pytestmark = [pytest.mark.ray, pytest.mark.subprocess]


def test_a_run_gets_its_own_lab_and_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPOTBURST_SPOTLAB_STATE_DIR", str(tmp_path / "state"))
    # The smallest lab with a spot node: the head and one spot node (each node is a
    # `ray start` of its own, started one after the other); α = 1: never preempted.
    config = SpotLabConfig(spot=1, on_demand=0, alpha=1.0, seed=3)
    run = WorkloadRun(name="doll", module="workloads.doll", args=TINY_DOLL_ARGS)
    shown: list[str] = []

    def show(line: str) -> None:  # printed too: a failed job's log is in pytest's report
        shown.append(line)
        print(line)

    out = run_workload(run, out=tmp_path / "results", show=show, lab=config)

    summary = json.loads((out / "summary.json").read_text())
    assert summary["target"].startswith("spotlab:")
    lab_id = summary["target"].removeprefix("spotlab:")
    assert summary["policies"]["on-demand"]["batches"] == 40
    assert any(line.startswith("submitted Ray job") for line in shown)  # through Jobs API
    assert json.loads((out / LAB_RECORD / "config.json").read_text()) == config.to_dict()
    events = [json.loads(line) for line in (out / LAB_RECORD / "events.jsonl").open()]
    assert {event["node"] for event in events if event["event"] == "join"} >= {
        "head", "spot-0"}
    records = (out / LAB_RECORD / "preemptions.jsonl").read_text()
    assert records == "".join(json.dumps(row, sort_keys=True) + "\n"
                              for row in preemption_records(events))  # α = 1: none
    assert recorded_lab_ids() == []  # the lab is gone: its state, and with it its processes
    assert not Path(f"/tmp/sbs-{lab_id}").exists()
