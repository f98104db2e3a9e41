"""Ordinary Ray Train V2 scripts under run-elastic on one real spot lab (an on-demand node and
three spot nodes, replacements after each kill), preempted by the run's own schedule:

- examples/elastic/ray_train_mlp.py, unchanged (a Ray-docs-style script: `train_func(config)`
  reading its config, prepare_data_loader, a checkpoint reported every epoch), runs elastic
  through two preemptions and resumes each time from its own latest checkpoint;
- examples/elastic/ray_train_mlp_spot.py, the same with the lines that call
  `checkpoint_due()`, loses no step through three preemptions, one of them while a worker
  group starts, every notice honoured (its checkpoint committed by Ray Train before the
  node's deadline), and its log shows no traceback for the ranks' hand-offs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import procs
from launch.elastic import LabInterrupter
from spotlab import SpotLab, SpotLabConfig, spot_lab
from spotlab.state import STATE_DIR_ENV
from tests.helpers.waiting import wait_until

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "elastic"
LAB = SpotLabConfig(spot=3, on_demand=1, head_cpus=0, cpus_per_node=1, alpha=1.0,
                    warning_s=6.0, replace_delay_s=3.0, object_store_mb=80, dashboard=False)
"""α = 1: no chain preemption; the runs' schedules interrupt nodes; replacements join."""
RUN_TIMEOUT_S = 900.0
UNCHANGED_EPOCHS = 32
"""Enough that the epochs after the second preemption point outlast a notice's warning: an
unchanged script trains on through the warning, and a run that ends inside it would see
its second notice but no preemption."""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpotLab]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_DIR_ENV, str(tmp_path_factory.mktemp("spotlab-state")))
        with spot_lab(LAB) as running:
            yield running


def workers_up(lab: SpotLab) -> bool:
    """Every slot of the lab has a joined node that is neither noticed nor gone."""
    joined, gone = set(), set()
    for event in lab.events():
        if event["event"] == "join":
            joined.add(event["node"])
        elif event["event"] in ("notice", "kill", "exit"):
            gone.add(event["node"])
    return len(joined - gone - {"head"}) == LAB.spot + LAB.on_demand


def run_script(lab: SpotLab, out: Path, args: list[str]) -> dict[str, Any]:
    wait_until(lambda: workers_up(lab), 180, "the lab's replacements joining")
    interrupter = LabInterrupter(show=lambda line: None)
    interrupter.attach(lab)
    command = [sys.executable, "-m", "workloads.elastic", "--out", str(out), *args]
    code, log = procs.follow(command, interrupter.show, timeout_s=RUN_TIMEOUT_S,
                             name="the elastic run", env=lab.driver_env, cwd=REPO)
    assert code == 0, "\n".join(log[-80:])
    records = {path.stem: [json.loads(row) for row in path.read_text().splitlines()]
               for path in (out / "records").glob("*.jsonl")}
    return {"summary": json.loads((out / "summary.json").read_text()), "records": records,
            "log": log, "interrupted": interrupter.applied}


@pytest.fixture(scope="module")
def unchanged(lab: SpotLab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_script(lab, tmp_path_factory.mktemp("unchanged") / "results", [
        "-f", str(EXAMPLES / "ray_train_mlp.py"), "--function", "train_func",
        "--config", json.dumps({"epochs": UNCHANGED_EPOCHS, "samples": 12000}),
        "--preempt-at", "4s,4s"])


@pytest.fixture(scope="module")
def opted_in(lab: SpotLab, unchanged: dict[str, Any],
             tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_script(lab, tmp_path_factory.mktemp("opted-in") / "results", [
        "-f", str(EXAMPLES / "ray_train_mlp_spot.py"), "--function", "train_func",
        "--config", json.dumps({"epochs": 10, "samples": 12000}),
        "--preempt-at", "4s,start,4s"])


def test_an_unchanged_ray_train_script_resumes_from_its_own_checkpoints(
        unchanged: dict[str, Any]) -> None:
    summary, records = unchanged["summary"], unchanged["records"]
    assert summary["completed"] and summary["step_unit"] == "report"
    assert len(unchanged["interrupted"]) == 2, unchanged["log"][-40:]
    assert summary["preemptions"] >= 2, summary["restarts"]
    assert summary["steps_done"] == UNCHANGED_EPOCHS  # one report per epoch, each reported
    resumed = [r for r in summary["restarts"] if r["cause"] == "preemption"]
    # each restart resumed from the latest checkpoint the script reported and Ray Train
    # committed before its group ended
    for restart in resumed:
        committed = [c for c in records["commits"] if c["checkpoint"]
                     and c["attempt"] < restart["attempt"]]
        latest = max(committed, key=lambda c: c["t"])
        attempt = next(a for a in records["attempts"] if a["attempt"] == restart["attempt"])
        assert attempt["resumed_from"] == latest["checkpoint"]
        assert restart["resumed_from_step"] == latest["metrics"]["epoch"]
    assert summary["final_metrics"]["epoch"] == UNCHANGED_EPOCHS - 1
    assert summary["final_metrics"]["accuracy"] > 0.9
    assert summary["metric"] == "loss"  # the first metric the script reports


def test_an_opted_in_script_loses_no_step_through_three_preemptions_one_at_start_up(
        opted_in: dict[str, Any]) -> None:
    summary = opted_in["summary"]
    assert summary["completed"] and summary["step_unit"] == "step", opted_in["log"][-40:]
    assert len(opted_in["interrupted"]) == 3 and summary["preemptions"] >= 3
    assert summary["lost_steps"] == 0
    assert summary["notices"] >= 3 and summary["notices_honoured"] == summary["notices"], \
        summary["notice_details"]
    assert summary["notices_during_startup"] >= 1, summary["notice_details"]
    saved = [n for n in summary["notice_details"] if n["checkpoint_step"] is not None]
    assert saved and all(n["committed"] <= n["deadline"] for n in saved)
    assert summary["final_metrics"]["accuracy"] > 0.9
    # each notice ended its group with the ranks' NoticeHandoff, the designed hand-off: the
    # workers' output reaches this log, but no traceback of it (its last line names it)
    log = opted_in["log"]
    assert any("(RayTrainWorker" in line for line in log)
    shown = [line for line in log if "NoticeHandoff" in line]
    assert not shown, shown[:10]
