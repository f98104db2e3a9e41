"""`run-burst --stack`: shape via SSM, tunnel to the login node, submit, results back through
the bucket, reset. The boundaries are faked: SSM (a boto3 client under botocore's Stubber,
every call's parameters checked, in order), the `aws ssm start-session` process (a fake `aws`
on PATH that prints what the plugin prints), the Ray Jobs call; the bucket is moto's
in-process S3; the stack outputs are the real program's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

import launch.burst as burst
import launch.targets as targets
from netem.profile import load_profile
from tests.helpers.fake_commands import FakeCommand, fake_command
from tests.helpers.ssm_stub import (
    discovery_lines,
    expect_result,
    expect_script,
    expect_secure_parameter,
    expect_send,
    stubbed_ssm,
)
from tests.helpers.stack_outputs import dev_stack_outputs
from vocab.errors import RunFailed
from workloads.burst.options import BurstOptions

# As the real dev stack exports them (through JSON), with the mocked ids and addresses.
OUTPUTS = dev_stack_outputs()
LOGIN, HPC, CLOUD = (OUTPUTS["burstInstanceIds"][role][0] for role in ("login", "hpc", "cloud"))
BUCKET = OUTPUTS["bucketName"]
BURST_TOKEN = "a" * 64
RESET_LINES = ["tc qdisc del dev eth0 root 2>/dev/null || true"]


def apply_lines(peer_cidr: str) -> list[str]:
    """The shaping script for 31 Mbit/s (--bw 30) with netem, written out."""
    return [
        *RESET_LINES,
        "set -e",
        "tc qdisc add dev eth0 root handle 1: htb default 0",
        "tc class add dev eth0 parent 1: classid 1:1 htb rate 10gbit ceil 10gbit",
        "tc qdisc add dev eth0 parent 1:1 handle 10: netem delay 0.15ms 0.005ms",
        "tc qdisc add dev eth0 parent 10:1 handle 20: tbf rate 31mbit burst 1024kbit"
        " latency 30ms",
        f"tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst {peer_cidr}"
        " flowid 1:1",
    ]


def expect_discovery(stubber: Stubber, round_: str) -> None:
    found = "spotburst-discover iface=eth0 netem=yes\n"
    expect_script(stubber, f"{round_}-disc-onprem", [LOGIN, HPC], discovery_lines("10.1.0.1"),
                  "spotburst netem discover onprem", stdout=found)
    expect_script(stubber, f"{round_}-disc-cloud", [CLOUD], discovery_lines("10.0.0.1"),
                  "spotburst netem discover cloud", stdout=found)


def expect_reset_of_every_node(stubber: Stubber) -> None:
    expect_discovery(stubber, "reset")
    expect_script(stubber, "reset-onprem", [LOGIN, HPC], RESET_LINES,
                  "spotburst netem reset onprem")
    expect_script(stubber, "reset-cloud", [CLOUD], RESET_LINES, "spotburst netem reset cloud")


SESSION_READY = (
    "Starting session with SessionId: s-1\n"
    "Port 40000 opened for sessionId s-1.\n"
    "Waiting for connections...\n"
)


def fake_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeCommand:
    """`aws ssm start-session`: says it waits for connections, ends when terminated."""
    return fake_command(monkeypatch, tmp_path / "bin", "aws", stdout=SESSION_READY)


def fake_results(out: str) -> dict[str, bytes]:
    record = {
        "scheduler": "data-aware",
        "task": "img-0000",
        "site": "cloud",
        "role": "cloud",
        "node_ip": "10.30.0.5",
        "transfer_start": 0.0,
        "transfer_end": 1.0,
        "compute_start": 1.0,
        "compute_end": 2.0,
    }
    summary = {
        "lab": "aws",
        "bandwidth_mbit": 31.0,
        "profile": "30m",
        "workload": "image",
        "data": "nfs",
        "lower_bound_s": 1.5,
        "bound": {"compute_s": {"onprem": 1.0, "cloud": 1.0}},
        "speedup": None,
        "runs": {
            "data-aware": {
                "makespan_s": 2.0,
                "tasks": 1,
                "tasks_on_cloud": 1,
                "bytes_to_cloud": 10,
                "retried_tasks": 0,
                "lost_nodes": 0,
                "makespan_over_bound": 1.33,
                "compute_s_mean_by_site": {"cloud": 1.0},
                "scheduler_cpu_s": 0.2,
                "site_cpu_s": {},  # no site namespaces on a stack: the scheduler's own only
            }
        },
    }
    return {
        "summary.json": json.dumps(summary).encode(),
        "provenance.json": b"{}",
        "records/tasks_data-aware.jsonl": (json.dumps(record) + "\n").encode(),
    }


@pytest.mark.subprocess
def test_the_stack_path_shapes_tunnels_submits_collects_and_resets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    submitted: dict[str, Any] = {}

    def fake_run_job(
        address: str,
        folder: Path,
        command: list[str],
        env: dict[str, str],
        show: Any,
        requirements: list[str] | None = None,
        token: str | None = None,
        python: str = "python",
        stall_timeout_s: float = 0.0,
        trace_log: Path | None = None,
    ) -> str:
        submitted.update(
            address=address,
            token=token,
            python=python,
            requirements=requirements,
            stall_timeout_s=stall_timeout_s,
            command=command,
            files=sorted(p.name for p in folder.rglob("*.json")),
        )
        job_out = command[command.index("--out") + 1]
        bucket, prefix = job_out.removeprefix("s3://").split("/", 1)
        s3 = boto3.client("s3", region_name="us-east-1")
        for name, data in fake_results(job_out).items():
            s3.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=data)
        return "log"

    aws = fake_aws(monkeypatch, tmp_path)
    monkeypatch.setattr(targets, "run_job", fake_run_job)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    out = tmp_path / "out"
    with stubbed_ssm() as (ssm, stubber), mock_aws():
        # in this order, or the stubber fails: discover, shape, the token, (the run),
        # discover, reset
        expect_discovery(stubber, "apply")
        expect_script(stubber, "apply-onprem", [LOGIN, HPC], apply_lines("10.1.0.0/16"),
                      "spotburst netem apply onprem")
        expect_script(stubber, "apply-cloud", [CLOUD], apply_lines("10.0.0.0/16"),
                      "spotburst netem apply cloud")
        expect_secure_parameter(stubber, OUTPUTS["burstTokenParameter"], BURST_TOKEN)
        expect_reset_of_every_node(stubber)
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
        burst.run_on_stack(
            BurstOptions(images=4),
            load_profile(bw=30),
            out,
            "dev",
            show=lambda line: None,
            outputs=OUTPUTS,
            ssm=ssm,
            stall_timeout_s=120.0,
        )
    [started] = aws.started()
    session = started["argv"]
    assert session[:3] == ["ssm", "start-session", "--target"]
    assert session[3] == LOGIN and "portNumber=8265" in " ".join(session)
    assert aws.terminated() == 1  # the session ended with the run
    port = session[session.index("--parameters") + 1].split("localPortNumber=")[1]
    assert submitted["address"] == f"http://127.0.0.1:{port}"
    assert submitted["token"] == BURST_TOKEN  # the cluster's own token, read decrypted
    assert submitted["python"] == "python"  # the cluster's own Python, not this machine's
    assert submitted["stall_timeout_s"] == 120.0  # the watchdog follows the job
    assert submitted["requirements"]  # the workload's imports, pinned, reach the burst cluster
    assert all("==" in pin and not pin.startswith("ray==") for pin in submitted["requirements"])
    command = submitted["command"]
    assert command[:2] == ["-m", "workloads.burst"]
    flags = dict(zip(command[2::2], command[3::2], strict=False))
    assert flags["--lab"] == "aws" and flags["--bandwidth-mbit"] == "31"
    assert flags["--data-dir"] == "/home/ec2-user/share/burst/inputs"
    assert flags["--images"] == "4" and flags["--target"] == "stack:dev"
    assert flags["--profile"] == "30m" and "--bucket" not in flags  # nfs: no bucket
    assert "30m.json" in submitted["files"]  # the profile travels for provenance
    assert flags["--profile-file"].endswith("30m.json")
    assert json.loads((out / "summary.json").read_text())["lab"] == "aws"
    assert (out / "records" / "tasks_data-aware.jsonl").is_file()


def test_a_failed_shaping_runs_nothing_and_still_resets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    aws = fake_aws(monkeypatch, tmp_path)
    with stubbed_ssm() as (ssm, stubber):
        expect_discovery(stubber, "apply")
        expect_script(stubber, "apply-onprem", [LOGIN, HPC], apply_lines("10.1.0.0/16"),
                      "spotburst netem apply onprem")
        expect_send(stubber, "apply-cloud", [CLOUD], apply_lines("10.0.0.0/16"),
                    "spotburst netem apply cloud")
        expect_result(stubber, "apply-cloud", CLOUD, status="Failed", code=1)
        # the shaped on-prem nodes are reset one by one, then every node once more
        for instance, role in ((LOGIN, "login"), (HPC, "hpc")):
            expect_script(stubber, f"undo-{role}", [instance], RESET_LINES,
                          f"spotburst netem reset {role}")
        expect_reset_of_every_node(stubber)
        with pytest.raises(RunFailed, match="shaping the burst nodes failed"):
            burst.run_on_stack(
                BurstOptions(),
                load_profile(bw=30),
                tmp_path / "o",
                "dev",
                show=lambda line: None,
                outputs=OUTPUTS,
                ssm=ssm,
            )
    assert aws.started() == []  # no tunnel opens when shaping failed
