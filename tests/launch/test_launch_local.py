"""The local default target: the workload in a child process with its own local Ray."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from launch.doll import run_doll
from launch.options import TargetOptions
from launch.targets import TargetError, run_workload
from launch.workload import WorkloadRun
from tests.helpers.doll import TINY_DOLL_ARGS as TINY
from workloads.common.spot_market.trace import TraceError
from workloads.doll.options import DollOptions

PROJECT_DIR = Path(__file__).resolve().parents[2]


@pytest.mark.ray
@pytest.mark.subprocess
def test_invoke_run_doll_lands_in_the_results_folder_and_draws(tmp_path: Path) -> None:
    out = tmp_path / "r"
    done = subprocess.run(
        [sys.executable, "-m", "invoke", "run-doll", *TINY, "--out", str(out)],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"results and figures in {out}" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["target"] == "local"
    assert summary["workers"] == 2
    assert summary["policies"]["on-demand"]["batches"] == 40
    parameters = json.loads((out / "provenance.json").read_text())["parameters"]
    assert (parameters["batch_size"], parameters["k"], parameters["rate"]) == (16, 2, 512.0)
    for figure in ("cost_vs_time.png", "accuracy_vs_cost.png", "cost_ratio.png"):
        assert (out / figure).stat().st_size > 1000


def test_bad_input_stops_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="nowhere-1z"):
        run_doll(DollOptions(zone="nowhere-1z"), TargetOptions(out=tmp_path / "r"))
    assert not (tmp_path / "r").exists()


def test_a_folder_with_results_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "summary.json").write_text("{}")
    with pytest.raises(TargetError, match="already holds files"):
        run_workload(
            WorkloadRun(name="doll", module="workloads.doll", args=TINY), out=tmp_path / "r"
        )
