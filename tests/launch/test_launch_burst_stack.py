"""`run-burst --stack`: shape via SSM, tunnel to the login node, submit, results back through
the bucket, reset. The boundaries are faked: SSM (boto3 client), the `aws ssm start-session`
process (a fake `aws` on PATH that prints what the plugin prints), the Ray Jobs call; the
bucket is moto's in-process S3."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

import launch.burst as burst
import launch.targets as targets
from launch.netem_aws import DISCOVER_MARK
from netem.profile import load_profile
from tests.helpers.fake_commands import FakeCommand, fake_command
from workloads.burst.options import BurstOptions

OUTPUTS = {
    "burstInstanceIds": {"login": ["i-login"], "hpc": ["i-hpc"], "cloud": ["i-cloud"]},
    "burstSiteCidrs": {"onprem": "10.20.0.0/16", "cloud": "10.30.0.0/16"},
    "bucketName": "burst-bucket",
    "region": "us-east-1",
}


class FakeSsm:
    """send_command / get_command_invocation: every script succeeds; discovery answers."""

    def __init__(self) -> None:
        self.scripts: list[tuple[list[str], list[str]]] = []

    def send_command(self, **kwargs: Any) -> dict[str, Any]:
        self.scripts.append((kwargs["InstanceIds"], kwargs["Parameters"]["commands"]))
        return {"Command": {"CommandId": str(len(self.scripts))}}

    def get_command_invocation(self, CommandId: str, InstanceId: str) -> dict[str, Any]:
        lines = self.scripts[int(CommandId) - 1][1]
        out = (
            f"{DISCOVER_MARK} iface=eth0 netem=yes\n"
            if any(DISCOVER_MARK in line for line in lines)
            else ""
        )
        return {
            "Status": "Success",
            "ResponseCode": 0,
            "StandardOutputContent": out,
            "StandardErrorContent": "",
        }


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
    ) -> str:
        submitted.update(
            address=address,
            requirements=requirements,
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
    ssm = FakeSsm()
    out = tmp_path / "out"
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="burst-bucket")
        burst.run_on_stack(
            BurstOptions(images=4),
            load_profile(bw=30),
            out,
            "dev",
            show=lambda line: None,
            outputs=OUTPUTS,
            ssm=ssm,
        )
    [started] = aws.started()
    session = started["argv"]
    assert session[:3] == ["ssm", "start-session", "--target"]
    assert session[3] == "i-login" and "portNumber=8265" in " ".join(session)
    assert aws.terminated() == 1  # the session ended with the run
    port = session[session.index("--parameters") + 1].split("localPortNumber=")[1]
    assert submitted["address"] == f"http://127.0.0.1:{port}"
    assert submitted["requirements"]  # the workload's imports, pinned, reach the burst cluster
    assert all("==" in pin and not pin.startswith("ray==") for pin in submitted["requirements"])
    command = submitted["command"]
    assert command[:2] == ["-m", "workloads.burst"]
    flags = dict(zip(command[2::2], command[3::2], strict=False))
    assert flags["--lab"] == "aws" and flags["--bandwidth-mbit"] == "31"
    assert flags["--profile"] == "30m" and "--bucket" not in flags  # nfs: no bucket
    assert flags["--data-dir"] == "/home/ec2-user/share/burst/inputs"
    assert flags["--images"] == "4" and flags["--target"] == "stack:dev"
    assert "30m.json" in submitted["files"]  # the profile travels for provenance
    assert flags["--profile-file"].endswith("30m.json")
    assert json.loads((out / "summary.json").read_text())["lab"] == "aws"
    shaping = json.loads((out / "shaping.json").read_text())
    assert shaping["lab"] == "aws" and {n["rate_mbit"] for n in shaping["nodes"]} == {31.0}
    assert {n["role"] for n in shaping["nodes"]} == {"login", "hpc", "cloud"}
    assert (out / "records" / "tasks_data-aware.jsonl").is_file()
    scripts = [" ".join(lines) for _, lines in ssm.scripts]
    shaped = [i for i, text in enumerate(scripts) if "tbf rate 31mbit" in text]
    resets = [
        i
        for i, text in enumerate(scripts)
        if "qdisc del dev eth0 root" in text and "tbf" not in text
    ]
    assert shaped and resets, "the profile must be applied, then reset"
    assert max(shaped) < min(resets)  # shaped before the run, reset after it


def test_a_failed_shaping_runs_nothing_and_still_resets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class FailingSsm(FakeSsm):
        def get_command_invocation(self, CommandId: str, InstanceId: str) -> dict[str, Any]:
            answer = super().get_command_invocation(CommandId, InstanceId)
            if InstanceId == "i-cloud" and not answer["StandardOutputContent"]:
                answer.update(Status="Failed", ResponseCode=1)
            return answer

    aws = fake_aws(monkeypatch, tmp_path)
    ssm = FailingSsm()
    with pytest.raises(RuntimeError, match="shaping the burst nodes failed"):
        burst.run_on_stack(
            BurstOptions(),
            load_profile(bw=30),
            tmp_path / "o",
            "dev",
            show=lambda line: None,
            outputs=OUTPUTS,
            ssm=ssm,
        )
    assert any("qdisc del" in " ".join(lines) for _, lines in ssm.scripts[-1:])
    assert aws.started() == []  # no tunnel opens when shaping failed
