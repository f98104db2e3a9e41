"""An ordinary Ray Train V2 script under run-elastic on a real spot lab (an on-demand node and
three spot nodes, replacements after each kill), preempted by the run's own schedule:
examples/elastic/ray_train_mlp.py, unchanged (a Ray-docs-style script: `train_func(config)`
reading its config, prepare_data_loader, a checkpoint reported every epoch), runs elastic
through two preemptions and resumes each time from its own latest checkpoint.

Its opted-in twin, examples/elastic/ray_train_mlp_spot.py, runs as docs/elastic.md shows it
(`invoke run-elastic -f ...`) in tests/acceptance/test_elastic.py.
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
