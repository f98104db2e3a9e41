"""`--stack`: stack outputs -> kubeconfig file -> the RayCluster's token from its Secret and
`kubectl port-forward` -> the address path with that token. Pulumi is faked in-process;
kubectl is faked at the process boundary (a script on PATH that checks its argv)."""

import base64
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import launch.targets as targets
from launch.port_forward import SecretUnreadable
from launch.targets import Remote, TargetError, run_workload
from launch.tunnel import TunnelFailed
from launch.workload import WorkloadRun
from stacks.outputs import StackOutputsError
from tests.helpers.stack_outputs import dev_stack_outputs

pytestmark = pytest.mark.subprocess

TOKEN = "s3cr3t-ray-token"
DOLL = WorkloadRun(name="doll", module="workloads.doll")
# As the real stack exports them: dollKubeconfig is a JSON string (a secret).
CHANGED: dict[str, Any] = {"region": "ca-central-1", "bucketName": "doll-results-123"}
OUTPUTS = dev_stack_outputs(**CHANGED)

# Answers exactly the two calls a --stack run makes, records each (argv, kubeconfig text and
# mode), and fails loudly on anything else.
FAKE_KUBECTL = """\
    import json, os, stat, sys, time
    argv = sys.argv[1:]
    config = argv[argv.index("--kubeconfig") + 1]
    record = {{
        "argv": argv,
        "config": open(config).read(),
        "mode": stat.S_IMODE(os.stat(config).st_mode),
        "config_path": config,
    }}
    with open({log!r}, "a") as log:
        log.write(json.dumps(record) + "\\n")
    rest = [arg for arg in argv[2:] if not arg.startswith("--request-timeout=")]
    if rest == ["get", "secret", "doll", "-n", "doll", "-o", "jsonpath={{.data.auth_token}}"]:
        print({secret!r}, end="")
    elif rest[:4] == ["port-forward", "-n", "doll", "svc/doll-head-svc"] and {forwards}:
        print(f"Forwarding from 127.0.0.1:{{rest[4].split(':')[0]}} -> 8265", flush=True)
        time.sleep(600)
    else:
        print(f"error: unexpected kubectl call {{argv}}", file=sys.stderr)
        sys.exit(1)
"""


def install_kubectl(
    folder: Path, monkeypatch: pytest.MonkeyPatch, secret: str, forwards: bool = True
) -> Path:
    log = folder / "kubectl.jsonl"
    script = folder / "bin" / "kubectl"
    script.parent.mkdir()
    body = textwrap.dedent(FAKE_KUBECTL).format(log=str(log), secret=secret, forwards=forwards)
    script.write_text(f"#!{sys.executable}\n{body}")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    return log


def calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.fixture
def remotes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Remote, dict[str, str | None]]]:
    """Pulumi outputs faked; run_remote replaced by one that records the remote it got, the
    auth variables of this process meanwhile, and that the Jobs API is reachable."""
    monkeypatch.setattr(
        targets.pulumi_cli,
        "stack_outputs",
        lambda stack, show_secrets=False: dev_stack_outputs(show_secrets, **CHANGED),
    )
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    seen: list[tuple[Remote, dict[str, str | None]]] = []

    def fake_run_remote(run: WorkloadRun, remote: Remote, out: Path, show: Any,
                        stall_timeout_s: float = 0.0) -> None:
        variables = {name: os.environ.get(name) for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
        seen.append((remote, variables))
        out.mkdir(parents=True)

    monkeypatch.setattr(targets, "run_remote", fake_run_remote)
    return seen


def test_stack_reads_the_token_then_runs_through_a_port_forward_and_the_stack_bucket(
    remotes: list[tuple[Remote, dict[str, str | None]]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    log = install_kubectl(tmp_path, monkeypatch, base64.b64encode(TOKEN.encode()).decode())
    run_workload(DOLL, stack="dev", out=tmp_path / "r")
    secret_call, forward_call = calls(log)
    port = int(forward_call["argv"][6].split(":")[0])
    assert forward_call["argv"][2:] == [
        "port-forward",
        "-n",
        OUTPUTS["dollNamespace"],
        f"svc/{OUTPUTS['dollHeadService']}",
        f"{port}:8265",
        "--address",
        "127.0.0.1",
    ]
    # the stack's JSON string is written as is: not re-encoded into a quoted string
    assert isinstance(OUTPUTS["dollKubeconfig"], str)
    assert json.loads(OUTPUTS["dollKubeconfig"])["kind"] == "Config"
    for call in (secret_call, forward_call):
        assert call["config"] == OUTPUTS["dollKubeconfig"] and call["mode"] == 0o600
    assert secret_call["config_path"] == forward_call["config_path"]
    assert not Path(secret_call["config_path"]).exists()  # removed after the run
    [(remote, variables)] = remotes
    assert remote == Remote(
        address=f"http://127.0.0.1:{port}",
        label="stack:dev",
        bucket="doll-results-123",
        region="ca-central-1",
        token=TOKEN,
    )
    assert TOKEN not in repr(remote)
    assert variables == {"RAY_AUTH_MODE": None, "RAY_AUTH_TOKEN": None}  # set only for the job


def test_an_unreadable_secret_is_named_and_nothing_runs(
    remotes: list[tuple[Remote, dict[str, str | None]]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    log = install_kubectl(tmp_path, monkeypatch, secret="")
    with pytest.raises(SecretUnreadable, match="doll/doll: no key 'auth_token'"):
        run_workload(DOLL, stack="dev", out=tmp_path / "r")
    [secret_call] = calls(log)
    assert not Path(secret_call["config_path"]).exists()
    assert remotes == []


def test_missing_outputs_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(
        targets.pulumi_cli,
        "stack_outputs",
        lambda stack, show_secrets=False: {"region": "us-east-1"},
    )
    with pytest.raises(StackOutputsError) as error:
        run_workload(DOLL, stack="dev", out=tmp_path / "r")
    expected = "dollKubeconfig, dollNamespace, dollHeadService, dollTokenSecret, bucketName"
    assert expected in str(error.value)
    assert "found: region" in str(error.value)


def test_a_missing_token_secret_output_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    outputs = {key: value for key, value in OUTPUTS.items() if key != "dollTokenSecret"}
    monkeypatch.setattr(
        targets.pulumi_cli, "stack_outputs", lambda stack, show_secrets=False: outputs
    )
    with pytest.raises(StackOutputsError, match="no output dollTokenSecret") as error:
        run_workload(DOLL, stack="dev", out=tmp_path / "r")
    assert "token auth" in str(error.value)


def test_a_failed_forward_reports_kubectl_and_cleans_up(
    remotes: list[tuple[Remote, dict[str, str | None]]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    log = install_kubectl(
        tmp_path, monkeypatch, base64.b64encode(TOKEN.encode()).decode(), forwards=False
    )
    with pytest.raises(TunnelFailed, match="unexpected kubectl call"):
        run_workload(DOLL, stack="dev", out=tmp_path / "r")
    assert len(calls(log)) == 2
    assert not Path(calls(log)[0]["config_path"]).exists()
    assert remotes == []


def test_address_and_stack_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="not both"):
        run_workload(
            DOLL,
            address="http://h:8265",
            stack="dev",
            out=tmp_path / "r",
        )


def test_the_token_travels_only_in_the_jobs_clients_own_header() -> None:
    from launch.ray_jobs import token_headers

    before = dict(os.environ)
    assert token_headers(TOKEN) == {"Authorization": f"Bearer {TOKEN}"}
    assert token_headers(None) is None
    assert dict(os.environ) == before
