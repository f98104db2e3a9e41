"""`--stack`: stack outputs -> kubeconfig file -> `kubectl port-forward` -> the address path,
with the Pulumi and kubectl processes faked (no cluster here)."""

import io
import os
import stat
from pathlib import Path
from typing import Any

import pytest

import launch.targets as targets
import launch.tunnel as tunnel_module
from launch.targets import Remote, TargetError, run_workload
from launch.tunnel import TunnelFailed
from launch.workload import WorkloadRun

OUTPUTS = {
    "dollKubeconfig": {"apiVersion": "v1", "clusters": [{"name": "doll"}]},
    "dollNamespace": "doll",
    "dollHeadService": "doll-head-svc",
    "dollRayClusterName": "doll",
    "bucketName": "doll-results-123",
    "region": "ca-central-1",
}


class FakeKubectl:
    """Stands in for `kubectl port-forward`: prints what kubectl prints, records its end."""

    launched: list["FakeKubectl"] = []

    def __init__(self, command: list[str], **_: Any) -> None:
        self.command = command
        config = Path(command[command.index("--kubeconfig") + 1])
        self.config_text = config.read_text()
        self.config_mode = stat.S_IMODE(os.stat(config).st_mode)
        self.config_path = config
        local = command[-3].split(":")[0]
        self.stdout = io.StringIO(f"Forwarding from 127.0.0.1:{local} -> 8265\n")
        self.stderr = io.StringIO("")
        self.terminated = False
        FakeKubectl.launched.append(self)

    def terminate(self) -> None:
        self.terminated = True

    kill = terminate

    def wait(self, timeout: float | None = None) -> int:
        return 0


class BrokenKubectl(FakeKubectl):
    def __init__(self, command: list[str], **kwargs: Any) -> None:
        super().__init__(command, **kwargs)
        self.stdout = io.StringIO("")
        self.stderr = io.StringIO('error: services "doll-head-svc" not found\n')


@pytest.fixture
def faked(monkeypatch: pytest.MonkeyPatch) -> list[Remote]:
    FakeKubectl.launched = []
    monkeypatch.setattr(
        targets.pulumi_cli,
        "stack_outputs",
        lambda stack, show_secrets=False: dict(OUTPUTS) if show_secrets else {},
    )
    monkeypatch.setattr(tunnel_module.subprocess, "Popen", FakeKubectl)
    remotes: list[Remote] = []

    def fake_run_remote(run: WorkloadRun, remote: Remote, out: Path, show: Any) -> None:
        assert FakeKubectl.launched[-1].terminated is False  # forwarding while the job runs
        remotes.append(remote)
        out.mkdir(parents=True)

    monkeypatch.setattr(targets, "run_remote", fake_run_remote)
    return remotes


def test_stack_runs_through_a_port_forward_and_the_stack_bucket(
    faked: list[Remote], tmp_path: Path
) -> None:
    run_workload(WorkloadRun(name="doll", module="workloads.doll"), stack="dev", out=tmp_path / "r")
    kubectl = FakeKubectl.launched[-1]
    port = int(kubectl.command[-3].split(":")[0])
    assert kubectl.command[3:] == [
        "port-forward",
        "-n",
        "doll",
        "svc/doll-head-svc",
        f"{port}:8265",
        "--address",
        "127.0.0.1",
    ]
    assert '"clusters"' in kubectl.config_text and kubectl.config_mode == 0o600
    assert faked == [
        Remote(
            address=f"http://127.0.0.1:{port}",
            label="stack:dev",
            bucket="doll-results-123",
            region="ca-central-1",
        )
    ]
    assert kubectl.terminated and not kubectl.config_path.exists()


def test_missing_outputs_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(
        targets.pulumi_cli,
        "stack_outputs",
        lambda stack, show_secrets=False: {"region": "us-east-1"},
    )
    with pytest.raises(TargetError) as error:
        run_workload(
            WorkloadRun(name="doll", module="workloads.doll"), stack="dev", out=tmp_path / "r"
        )
    assert "dollKubeconfig, dollNamespace, dollHeadService, bucketName" in str(error.value)
    assert "found: region" in str(error.value)


def test_a_failed_forward_reports_kubectl_and_cleans_up(
    faked: list[Remote], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tunnel_module.subprocess, "Popen", BrokenKubectl)
    with pytest.raises(TunnelFailed, match='services "doll-head-svc" not found'):
        run_workload(
            WorkloadRun(name="doll", module="workloads.doll"), stack="dev", out=tmp_path / "r"
        )
    kubectl = FakeKubectl.launched[-1]
    assert kubectl.terminated and not kubectl.config_path.exists()
    assert faked == []


def test_address_and_stack_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="not both"):
        run_workload(
            WorkloadRun(name="doll", module="workloads.doll"),
            address="http://h:8265",
            stack="dev",
            out=tmp_path / "r",
        )
