"""The s3 path (param-server against the lab's moto_server) and the fault case (the cloud
node killed mid-run), on one lab; the fault test kills the cloud node, so it runs last."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from launch.burst import Watch, lab_driver_argv, run_driver
from netem.lab import LabDescription
from netem.lab.addressing import namespace_name
from netem.lab.netns import namespace_pids
from netem.profile import load_profile
from tests.helpers.burst_results import LAB_BANDWIDTH, read_summary, read_tasks
from tests.helpers.lab import needs_netns
from vocab.burst import SITE_CLOUD
from workloads.burst.options import BurstOptions

pytestmark = [pytest.mark.lab, pytest.mark.ray, needs_netns]


def run(
    lab: LabDescription, options: BurstOptions, out: Path, watch: Watch | None = None
) -> list[str]:
    lines: list[str] = []
    argv = lab_driver_argv(lab, options, load_profile(bw=LAB_BANDWIDTH), out)
    run_driver(lab, argv, lines.append, watch)
    return lines


def test_param_server_reads_its_inputs_from_s3_on_every_node(
    shared_lab: LabDescription, tmp_path: Path
) -> None:
    options = BurstOptions(
        workload="param-server", data="s3", directories=6, images_per_directory=2
    )
    lines = run(shared_lab, options, tmp_path)
    assert any("generating 6 param-server tasks at s3://spotburst-burst/" in line for line in lines)
    summary = read_summary(tmp_path)
    assert summary["data"] == "s3" and summary["workload"] == "param-server"
    for name, run_summary in summary["runs"].items():
        records = read_tasks(tmp_path, name)
        assert sorted(r["task"] for r in records) == [f"dir-{i:03d}" for i in range(6)]
        # s3: no node sees the data in place; every task downloads its own directory
        assert all(r["bytes_moved"] == r["bytes"] > 0 for r in records)
        assert all(r["output"].startswith("loss=") for r in records)
        assert run_summary["updates"] == 6  # every gradient reached the parameter server
    # a second run finds the uploaded inputs and reuses them
    again = run(
        shared_lab,
        BurstOptions(
            workload="param-server",
            data="s3",
            schedulers=("data-aware",),
            directories=6,
            images_per_directory=2,
        ),
        tmp_path / "again",
    )
    assert any("reusing 6 tasks at s3://" in line for line in again)


def test_killing_the_cloud_node_mid_run_still_yields_every_output(
    shared_lab: LabDescription, tmp_path: Path
) -> None:
    killed: list[int] = []

    def kill_cloud_after_its_first_task(line: str, lab: LabDescription) -> None:
        if not killed and "[data-aware]" in line and f" on {SITE_CLOUD} " in line:
            for pid in namespace_pids(namespace_name(lab.lab_id, SITE_CLOUD)):
                try:
                    os.kill(pid, signal.SIGKILL)  # every process of the lab's cloud site
                except ProcessLookupError:
                    continue  # a short-lived worker that ended since it was listed
                killed.append(pid)

    options = BurstOptions(
        workload="image", data="nfs", schedulers=("data-aware",), images=16, image_side=900
    )
    lines = run(shared_lab, options, tmp_path, kill_cloud_after_its_first_task)
    assert killed, "the cloud node never finished a task, so it was never killed"
    summary = read_summary(tmp_path)
    run_summary = summary["runs"]["data-aware"]
    records = read_tasks(tmp_path, "data-aware")
    assert sorted(r["task"] for r in records) == [f"img-{i:04d}" for i in range(16)]
    assert all(r["output"] for r in records)
    assert run_summary["tasks"] == 16
    # the dead cloud's queue went on-prem: by a retry once a task of it failed (the node
    # dropped), or by the tail's take-over before the run needed the node again (then the
    # loss may never be seen within the run)
    if run_summary["lost_nodes"]:
        assert run_summary["lost_nodes"] == 1 and run_summary["retried_tasks"] >= 1
        retried = [r for r in records if r["attempt"] > 1]
        assert retried and all(r["site"] == "onprem" for r in retried)
        assert any("dropping the node" in line for line in lines)
    else:
        assert run_summary["taken_over_tasks"] >= 1
        assert any("moves from cloud" in line for line in lines)
