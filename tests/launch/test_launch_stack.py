"""`--stack`: stack outputs -> kubeconfig file -> `kubectl port-forward` -> the address path,
with Pulumi faked and kubectl a stand-in executable on PATH (no cluster here)."""

from pathlib import Path
from typing import Any

import pytest

import launch.targets as targets
from launch.targets import Remote, TargetError, run_workload
from launch.tunnel import TunnelFailed
from launch.workload import WorkloadRun
from stacks.outputs import StackOutputsError
from tests.helpers.fake_commands import FakeCommand, fake_command

pytestmark = pytest.mark.subprocess
DOLL = WorkloadRun(name="doll", module="workloads.doll")

OUTPUTS = {
    "dollKubeconfig": {"apiVersion": "v1", "clusters": [{"name": "doll"}]},
    "dollNamespace": "doll",
    "dollHeadService": "doll-head-svc",
    "dollRayClusterName": "doll",
    "bucketName": "doll-results-123",
    "region": "ca-central-1",
}


@pytest.fixture
def remotes(monkeypatch: pytest.MonkeyPatch) -> list[Remote]:
    """Pulumi answers with OUTPUTS; the Ray Job is replaced by a record of its target."""
    monkeypatch.setattr(
        targets.pulumi_cli,
        "stack_outputs",
        lambda stack, show_secrets=False: dict(OUTPUTS) if show_secrets else {},
    )
    seen: list[Remote] = []

    def fake_run_remote(run: WorkloadRun, remote: Remote, out: Path, show: Any) -> None:
        seen.append(remote)
        out.mkdir(parents=True)

    monkeypatch.setattr(targets, "run_remote", fake_run_remote)
    return seen


def kubectl(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **behaviour: Any) -> FakeCommand:
    return fake_command(monkeypatch, tmp_path / "bin", "kubectl", **behaviour)


def test_stack_runs_through_a_port_forward_and_the_stack_bucket(
    remotes: list[Remote], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = kubectl(monkeypatch, tmp_path, stdout="Forwarding from 127.0.0.1:1 -> 8265\n")
    run_workload(DOLL, stack="dev", out=tmp_path / "r")
    [started] = fake.started()
    command = started["argv"]
    port = int(command[-3].split(":")[0])
    assert command[2:] == [
        "port-forward",
        "-n",
        "doll",
        "svc/doll-head-svc",
        f"{port}:8265",
        "--address",
        "127.0.0.1",
    ]
    assert '"clusters"' in started["kubeconfig"] and started["kubeconfig_mode"] == 0o600
    assert remotes == [
        Remote(
            address=f"http://127.0.0.1:{port}",
            label="stack:dev",
            bucket="doll-results-123",
            region="ca-central-1",
        )
    ]
    assert fake.terminated() == 1  # stopped by its PID once the run was over
    assert not Path(command[command.index("--kubeconfig") + 1]).exists()


def test_missing_outputs_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(
        targets.pulumi_cli,
        "stack_outputs",
        lambda stack, show_secrets=False: {"region": "us-east-1"},
    )
    with pytest.raises(StackOutputsError) as error:
        run_workload(DOLL, stack="dev", out=tmp_path / "r")
    assert "dollKubeconfig, dollNamespace, dollHeadService, bucketName" in str(error.value)
    assert "found: region" in str(error.value)


def test_a_failed_forward_reports_kubectl_and_cleans_up(
    remotes: list[Remote], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = kubectl(monkeypatch, tmp_path, stderr='error: services "doll-head-svc" not found\n',
                   exit_code=1)
    with pytest.raises(TunnelFailed, match='exited 1: error: services "doll-head-svc" not found'):
        run_workload(DOLL, stack="dev", out=tmp_path / "r")
    [started] = fake.started()
    assert not Path(started["argv"][started["argv"].index("--kubeconfig") + 1]).exists()
    assert remotes == []


def test_without_kubectl_the_stack_path_says_what_is_missing(
    remotes: list[Remote], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no kubectl on it
    with pytest.raises(TunnelFailed, match="kubectl is not installed"):
        run_workload(DOLL, stack="dev", out=tmp_path / "r")


def test_address_and_stack_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="not both"):
        run_workload(
            WorkloadRun(name="doll", module="workloads.doll"),
            address="http://h:8265",
            stack="dev",
            out=tmp_path / "r",
        )
