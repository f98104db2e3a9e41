"""`invoke infer-up --stack`: the service brought up by a Ray Job through the stack path
(outputs -> kubeconfig -> token Secret -> the head's port-forward), then every command
through a port-forward to the coordinator's pod, found by the IP it published. Pulumi and
the Ray Job are faked in-process; kubectl is faked at the process boundary by a script that
answers the calls a service on a stack makes — its pod port-forward is a real TCP forwarder
to a real command endpoint standing in for the coordinator."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import launch.targets as targets
from launch.inference import STATE_DIR_ENV, ServiceRecord, command, infer_down, infer_up
from launch.workload import WorkloadRun
from spotlab import SpotLabConfig
from tests.helpers.stack_outputs import dev_stack_outputs
from workloads.common.storage import LocalStorage
from workloads.inference.endpoint import COMMAND_TOKEN_ENV, CommandEndpoint, publish_endpoint
from workloads.inference.options import ServiceOptions

pytestmark = pytest.mark.subprocess

POD = "inference-on-demand-workers-x7k2p"
FAKE_KUBECTL = """\
    import json, socket, sys, threading
    argv = sys.argv[1:]
    with open({log!r}, "a") as log:
        log.write(json.dumps(argv) + "\\n")
    rest = [arg for arg in argv[2:] if not arg.startswith("--request-timeout=")]

    def pipe(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            sink.close()

    if rest[:3] == ["get", "secret", "inference"]:
        print("cmF5LXRva2Vu", end="")  # base64 of the Ray token
    elif rest[:4] == ["port-forward", "-n", "inference", "svc/inference-head-svc"]:
        print("Forwarding from 127.0.0.1:1 -> 8265", flush=True)
        threading.Event().wait(600)
    elif rest[:6] == ["get", "pods", "-n", "inference", "--field-selector",
                      "status.podIP=127.0.0.1,status.phase=Running"]:
        print({pod!r}, end="")
    elif rest[:4] == ["port-forward", "-n", "inference", "pod/{pod}"]:
        local, remote = (int(port) for port in rest[4].split(":"))
        server = socket.create_server(("127.0.0.1", local))
        print(f"Forwarding from 127.0.0.1:{{local}} -> {{remote}}", flush=True)
        while True:
            client, _ = server.accept()
            upstream = socket.create_connection(("127.0.0.1", remote))
            threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
    else:
        print(f"error: unexpected kubectl call {{argv}}", file=sys.stderr)
        sys.exit(1)
"""


class Cluster:
    """What the fake Ray Jobs do on the stack's cluster: the coordinator's command endpoint
    (with the token from the job's settings file) up, then down."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.endpoint: CommandEndpoint | None = None
        self.settings_mode = 0
        self.settings_text = ""
        self.jobs: list[tuple[WorkloadRun, targets.Remote, dict[str, Any] | None]] = []

    def run_remote(self, run: WorkloadRun, remote: targets.Remote, out: Path,
                   show: Any, *rest: Any) -> None:
        settings = None
        if "--settings" in run.inputs:
            self.settings_text = run.inputs["--settings"].read_text()
            settings = json.loads(self.settings_text)
            self.settings_mode = run.inputs["--settings"].stat().st_mode & 0o777
            settings["command_token"] = run.env.get(COMMAND_TOKEN_ENV)
        self.jobs.append((run, remote, settings))
        if "down" not in run.args:  # --action up is the default
            assert settings is not None
            self.endpoint = CommandEndpoint(
                lambda method, args: {"ok": True, "jobs": {}, "coordinator_incarnation": 1},
                settings["command_token"], "127.0.0.1", port=0)
            publish_endpoint(LocalStorage(self.store), self.endpoint.url, 1)
            summary: dict[str, Any] = {"store": str(self.store),
                                       "endpoint": {"url": self.endpoint.url}}
        else:
            assert self.endpoint is not None
            self.endpoint.close()
            self.endpoint = None
            summary = {"workers_stopped": 3}
        out.mkdir(parents=True)
        (out / "summary.json").write_text(json.dumps(summary))


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    monkeypatch.setattr(targets.pulumi_cli, "stack_outputs",
                        lambda stack, show_secrets=False: dev_stack_outputs(show_secrets))
    fake = Cluster(tmp_path / "store")
    monkeypatch.setattr(targets, "run_remote", fake.run_remote)
    script = tmp_path / "bin" / "kubectl"
    script.parent.mkdir()
    body = textwrap.dedent(FAKE_KUBECTL).format(log=str(tmp_path / "kubectl.jsonl"), pod=POD)
    script.write_text(f"#!{sys.executable}\n{body}")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    yield fake
    if fake.endpoint is not None:
        fake.endpoint.close()


def kubectl_calls(tmp_path: Path) -> list[list[str]]:
    lines = (tmp_path / "kubectl.jsonl").read_text().splitlines()
    return [json.loads(line)[2:] for line in lines]  # without --kubeconfig FILE


def test_infer_up_on_a_stack_then_commands_through_the_coordinators_pod(
        cluster: Cluster, tmp_path: Path) -> None:
    record = infer_up(ServiceOptions(workers=5), SpotLabConfig(), stack="dev")
    [(run, remote, settings)] = cluster.jobs
    assert run.module == "workloads.inference.up" and run.args == ()  # --action up
    assert set(run.inputs) == {"--settings"}
    assert remote.label == "stack:dev" and remote.token == "ray-token"
    assert remote.bucket == "spotburst-dev-mock"
    # the token travels in the job's environment: neither in the settings file with the
    # job's code (every worker's working folder) nor on its command line
    assert settings is not None and settings["workers"] == 5
    assert settings["command_token"] == record.command_token
    assert record.command_token and record.command_token not in cluster.settings_text
    line = run.command("out", "stack:dev", {"--settings": "settings.json"})
    assert record.command_token not in " ".join(line)
    assert cluster.settings_mode == 0o600
    assert settings["store"] == ""  # the job puts the store beside its results, on S3
    assert (record.stack, record.store) == ("dev", str(cluster.store))
    assert ServiceRecord.load() == record

    assert cluster.endpoint is not None
    port = cluster.endpoint.url.rpartition(":")[2]
    assert command("job_status")["coordinator_incarnation"] == 1
    calls = kubectl_calls(tmp_path)
    assert ["get", "pods", "-n", "inference", "--field-selector",
            "status.podIP=127.0.0.1,status.phase=Running", "-o",
            "jsonpath={.items[*].metadata.name}"] in calls
    [forward] = [call for call in calls if call[3] == f"pod/{POD}"]
    assert forward[4].endswith(f":{port}") and forward[-2:] == ["--address", "127.0.0.1"]

    assert infer_down()[0] == "coordinator and 3 workers stopped"
    assert cluster.jobs[-1][0].args == ("--action", "down")
    assert not (tmp_path / "state" / "service.json").exists()
