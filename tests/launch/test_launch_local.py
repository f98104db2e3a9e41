"""The local default target: the workload in a child process with its own local Ray."""

import json
from pathlib import Path

import pytest

from launch.doll import DollOptions, run_doll
from launch.targets import TargetError, run_workload
from launch.workload import WorkloadRun
from tests.launch.test_launch_address import TINY
from workloads.doll.figures import draw


def test_local_run_lands_in_the_results_folder_and_draws(tmp_path: Path) -> None:
    out = run_workload(WorkloadRun("doll", "workloads.doll", TINY), out=tmp_path / "r")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["target"] == "local"
    assert summary["policies"]["on-demand"]["batches"] == 40
    assert {path.name for path in draw(out)} == {
        "cost_vs_time.png",
        "accuracy_vs_cost.png",
        "cost_ratio.png",
    }


def test_bad_flags_stop_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--alpha"):
        run_doll(DollOptions(alpha="1.5"), out=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_a_folder_with_results_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "summary.json").write_text("{}")
    with pytest.raises(TargetError, match="already holds files"):
        run_workload(WorkloadRun("doll", "workloads.doll", TINY), out=tmp_path / "r")
