"""`run-burst` / `sweep-burst` refuse flags the lab cannot hold before a lab starts: one line
naming the flag, exit 2, no lab and no results folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from launch.burst import check_fits_lab
from launch.options import BurstLabOptions
from netem.lab.state import STATE_DIR_ENV
from workloads.burst.options import BurstOptions
from workloads.common.options import OptionError

PROJECT_DIR = Path(__file__).resolve().parents[2]
INVOKE = [sys.executable, "-m", "invoke"]
TOO_BIG = ("error: --task-cpus: 5 CPUs per task, more than a lab worker node has "
           "(hpc 2: --hpc-cpus, cloud 2: --cloud-cpus)")


@pytest.mark.parametrize(("task_cpus", "lab", "fits"), [
    (None, BurstLabOptions(hpc_cpus=1, cloud_cpus=1), True),  # the smallest node's CPUs
    (2, BurstLabOptions(), True),
    (3, BurstLabOptions(), False),
    (3, BurstLabOptions(hpc_cpus=4, cloud_cpus=3), True),
    (3, BurstLabOptions(hpc_cpus=4, cloud_cpus=2), False),  # the cloud node could hold none
    (3, BurstLabOptions(hpc_cpus=2, cloud_cpus=4), False),  # nor the HPC worker
])
def test_a_task_must_fit_every_worker_node_of_the_lab(
    task_cpus: int | None, lab: BurstLabOptions, fits: bool
) -> None:
    options = BurstOptions(task_cpus=task_cpus)
    if fits:
        check_fits_lab(options, lab)
        return
    with pytest.raises(OptionError) as refused:
        check_fits_lab(options, lab)
    assert refused.value.flag == "--task-cpus"
    assert f"hpc {lab.hpc_cpus}" in refused.value.problem
    assert f"cloud {lab.cloud_cpus}" in refused.value.problem


@pytest.mark.subprocess
@pytest.mark.parametrize("command", [
    ["run-burst", "--bw", "100", "--task-cpus", "5"],
    ["sweep-burst", "--bw", "30,100", "--task-cpus", "5"],
])
def test_a_task_bigger_than_the_lab_nodes_is_one_line_exit_2_and_starts_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    labs = tmp_path / "labs"  # a lab records itself here as it starts (kept after it ends)
    done = subprocess.run(
        [*INVOKE, *command, "--out", str(tmp_path / "never")],
        cwd=PROJECT_DIR,
        env={**os.environ, STATE_DIR_ENV: str(labs)},
        capture_output=True,
        text=True,
        timeout=600,  # a guard against a hang only
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == TOO_BIG + "\n"
    assert done.stdout == ""
    assert not (tmp_path / "never").exists()
    assert not labs.exists()
