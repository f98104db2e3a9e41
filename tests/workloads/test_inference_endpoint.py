"""The coordinator's HTTP command endpoint and the CLI's side of it, without Ray: stand-in
commands served by the real endpoint on loopback, the real client, the real store file.
Token checks, JSON only, one-line refusals, and the CLI finding a restarted coordinator's
new address through the store."""

from __future__ import annotations

import json
import pickle
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from launch.inference import STATE_DIR_ENV, ServiceRecord, command
from netem.ports import free_local_port
from workloads.common.storage import LocalStorage
from workloads.inference.endpoint import (
    COMMAND_PATH,
    CommandEndpoint,
    EndpointUnreachable,
    ServiceError,
    listen_host,
    publish_endpoint,
    send_command,
)

TOKEN = "t0ken-of-this-service"


class Jobs:
    """Stand-in commands: what reached them, under a lock like the coordinator's."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def job_status(self, name: str | None = None) -> dict[str, Any]:
        with self.lock:
            self.calls.append(("job_status", (name,)))
            if name not in (None, "a"):
                return {"ok": False, "error": f"unknown job {name!r}\n(jobs: a)"}
            return {"ok": True, "jobs": {"a": {"state": "idle"}}}

    def commands(self) -> dict[str, Any]:
        return {"job_status": self.job_status}


@pytest.fixture
def jobs() -> Jobs:
    return Jobs()


@pytest.fixture
def endpoint(jobs: Jobs) -> Iterator[CommandEndpoint]:
    served = CommandEndpoint(jobs.commands(), TOKEN, "127.0.0.1", port=0)
    yield served
    served.close()


def raw(url: str, body: bytes, headers: dict[str, str],
        method: str = "POST") -> tuple[int, bytes]:
    request = urllib.request.Request(url + COMMAND_PATH, data=body if method == "POST" else None,
                                     headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_a_request_without_the_token_gets_a_bare_401_and_runs_nothing(
        endpoint: CommandEndpoint, jobs: Jobs) -> None:
    body = json.dumps({"method": "job_status", "args": []}).encode()
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN},
                    {"Authorization": f"Bearer {TOKEN}x"}, {"Authorization": f"Basic {TOKEN}"}):
        assert raw(endpoint.url, body, headers) == (401, b""), headers
        assert raw(endpoint.url, b"", headers, method="GET") == (401, b""), headers
    assert jobs.calls == []
    with pytest.raises(EndpointUnreachable, match="refused the service's token"):
        send_command(endpoint.url, "wrong", "job_status", [], 2.0)


def test_only_json_naming_a_served_command_reaches_the_commands(
        endpoint: CommandEndpoint, jobs: Jobs) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    pickled = pickle.dumps({"method": "job_status", "args": []})
    status, answer = raw(endpoint.url, pickled, auth)
    assert status == 400 and b"expected JSON" in answer
    status, answer = raw(endpoint.url, json.dumps({"method": "shutdown"}).encode(), auth)
    assert status == 400 and json.loads(answer)["error"].startswith("no command 'shutdown'")
    assert jobs.calls == []
    with pytest.raises(ServiceError, match="^job_status: "):  # too many arguments
        send_command(endpoint.url, TOKEN, "job_status", ["a", "b"], 2.0)
    assert send_command(endpoint.url, TOKEN, "job_status", ["a"], 2.0)["jobs"] == {
        "a": {"state": "idle"}}
    with pytest.raises(ServiceError) as refused:
        send_command(endpoint.url, TOKEN, "job_status", ["ghost"], 2.0)
    assert str(refused.value) == "unknown job 'ghost' (jobs: a)"  # one line
    assert jobs.calls == [("job_status", ("a",)), ("job_status", ("ghost",))]


def test_a_taken_port_binds_another_one(jobs: Jobs, endpoint: CommandEndpoint) -> None:
    port = int(endpoint.url.rpartition(":")[2])
    second = CommandEndpoint(jobs.commands(), TOKEN, "127.0.0.1", port=port)
    try:
        assert second.url != endpoint.url
        assert send_command(second.url, TOKEN, "job_status", [], 2.0)["ok"]
    finally:
        second.close()


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ServiceRecord:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    gone = f"http://127.0.0.1:{free_local_port()}"  # nobody listens there
    saved = ServiceRecord("127.0.0.1:1", {}, str(tmp_path / "store"), None, None, 0.0,
                          TOKEN, gone)
    saved.save()
    return saved


def test_the_cli_follows_a_restarted_coordinator_to_its_new_address(
        record: ServiceRecord, endpoint: CommandEndpoint) -> None:
    store = LocalStorage(Path(record.store))
    publish_endpoint(store, endpoint.url, incarnation=2)
    assert command("job_status")["jobs"] == {"a": {"state": "idle"}}
    assert ServiceRecord.load().command_url == endpoint.url  # asked there from now on
    assert (Path(record.store).parent / "state" / "service.json").stat().st_mode & 0o077 == 0


def test_a_coordinator_that_does_not_answer_yet_is_one_line(record: ServiceRecord) -> None:
    with pytest.raises(ServiceError, match="published no command endpoint"):
        command("job_status")
    publish_endpoint(LocalStorage(Path(record.store)), record.command_url, incarnation=3)
    with pytest.raises(ServiceError) as restarting:
        command("job_status")
    assert "incarnation 3) does not answer, restarting?" in str(restarting.value)
    assert "\n" not in str(restarting.value)
    publish_endpoint(LocalStorage(Path(record.store)), None, incarnation=3)  # infer-down
    with pytest.raises(ServiceError, match="infer-down stopped it"):
        command("job_status")


def test_the_endpoint_binds_the_nodes_ip_or_the_whole_pod_in_kubernetes() -> None:
    assert listen_host("10.0.3.7", {}) == "10.0.3.7"
    assert listen_host("10.0.3.7", {"KUBERNETES_SERVICE_HOST": "172.20.0.1"}) == "0.0.0.0"
