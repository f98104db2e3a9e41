"""The coordinator's HTTP command endpoint and the CLI's side of it, without Ray: a stand-in
command handler served by the real endpoint on loopback, the real client, the real store
file. The endpoint proves it holds the token before the client sends anything; commands are
signed with the token, never carry it (stale, replayed, tampered and unsigned requests are
refused), and answers are signed too; JSON only; the endpoint accepts exactly the commands
the CLI would send; one-line refusals; the CLI finding a restarted coordinator's new address
through the store, and never sending a command where a forged endpoint record points."""

from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from launch.inference import STATE_DIR_ENV, ServiceRecord, command
from netem.ports import free_local_port
from workloads.common.storage import LocalStorage
from workloads.inference.endpoint import (
    COMMAND_PATH,
    HELLO_PATH,
    MAX_SKEW_S,
    NONCE_HEADER,
    SIGNATURE_HEADER,
    CommandEndpoint,
    EndpointUnproven,
    ServiceError,
    listen_host,
    proof,
    publish_endpoint,
    send_command,
    signed_headers,
)

TOKEN = "t0ken-of-this-service"
REPO = Path(__file__).resolve().parents[2]


class Jobs:
    """A stand-in for the coordinator's `command`: what reached it, under a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def command(self, method: str, args: list[Any]) -> dict[str, Any]:
        with self.lock:
            self.calls.append((method, tuple(args)))
            if method == "job_status" and args not in ([], ["a"]):
                return {"ok": False, "error": f"unknown job {args[0]!r}\n(jobs: a)"}
            return {"ok": True, "jobs": {"a": {"state": "idle"}}}


@pytest.fixture
def jobs() -> Jobs:
    return Jobs()


@pytest.fixture
def endpoint(jobs: Jobs) -> Iterator[CommandEndpoint]:
    served = CommandEndpoint(jobs.command, TOKEN, "127.0.0.1", port=0)
    yield served
    served.close()


def raw(url: str, path: str, body: bytes, headers: dict[str, str],
        method: str = "POST") -> tuple[int, bytes]:
    """One request on its own connection: (status, body)."""
    import http.client
    from urllib.parse import urlsplit

    where = urlsplit(url)
    connection = http.client.HTTPConnection(str(where.hostname), where.port, timeout=5)
    try:
        connection.request(method, path, body=body if method == "POST" else None,
                           headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def signed(body: bytes, **change: Any) -> dict[str, str]:
    """A command's headers, signed with the service's token (or as `change` says)."""
    return signed_headers(change.pop("token", TOKEN), "POST", change.pop("path", COMMAND_PATH),
                          body, **change)


def test_a_command_not_signed_with_the_token_gets_a_bare_401_and_runs_nothing(
        endpoint: CommandEndpoint, jobs: Jobs) -> None:
    body = json.dumps({"method": "job_status", "args": []}).encode()
    other = json.dumps({"method": "job_status", "args": ["a"]}).encode()
    import time

    for case, headers in {
            "unsigned": {}, "a bearer token": {"Authorization": f"Bearer {TOKEN}"},
            "another token": signed(body, token="wrong"),
            "signed for another body": signed(other),
            "signed for another path": signed(body, path="/hello"),
            "stale": signed(body, now=time.time() - MAX_SKEW_S - 5),
            "from the future": signed(body, now=time.time() + MAX_SKEW_S + 5),
            "a nonce that is not one": signed(body, nonce="x" * 32)}.items():
        assert raw(endpoint.url, COMMAND_PATH, body, headers) == (401, b""), case
        assert raw(endpoint.url, COMMAND_PATH, b"{}", headers, method="GET")[0] == 401, case
    assert jobs.calls == []
    once = signed(body)
    assert raw(endpoint.url, COMMAND_PATH, body, once)[0] == 200
    assert raw(endpoint.url, COMMAND_PATH, body, once) == (401, b"")  # the replay
    assert jobs.calls == [("job_status", ())]
    # a client with another token: the endpoint's proof does not check out, so the client
    # stops before sending anything more
    with pytest.raises(EndpointUnproven, match="did not prove it holds the service's token"):
        send_command(endpoint.url, "wrong", "job_status", [], 2.0)
    assert jobs.calls == [("job_status", ())]


def test_an_answer_is_believed_only_when_signed_for_the_request(
        endpoint: CommandEndpoint) -> None:
    """The real endpoint signs its answer with the token for this request's nonce; a relay
    that passes the hello and changes the answer is caught."""
    import http.client
    from urllib.parse import urlsplit

    body = json.dumps({"method": "job_status", "args": []}).encode()
    headers = signed(body)
    where = urlsplit(endpoint.url)
    connection = http.client.HTTPConnection(str(where.hostname), where.port, timeout=5)
    try:
        connection.request("POST", COMMAND_PATH, body=body, headers=headers)
        response = connection.getresponse()
        answer = response.read()
    finally:
        connection.close()
    from workloads.inference.endpoint import signature

    assert response.getheader(SIGNATURE_HEADER) == signature(
        TOKEN, "answer", headers[NONCE_HEADER], "200", body=answer)
    listener = Listener(relay=endpoint.url, change_answer=True)
    try:
        with pytest.raises(EndpointUnproven, match="answered without the service's signature"):
            send_command(endpoint.url, TOKEN, "job_status", [], 2.0, connect_url=listener.url)
        assert TOKEN.encode() not in listener.received  # signed, never sent
        assert COMMAND_PATH.encode() in listener.received
    finally:
        listener.close()


def test_the_hello_proves_the_token_for_this_nonce_and_url_only(
        endpoint: CommandEndpoint) -> None:
    nonce = "0123456789abcdef" * 2
    status, body = raw(endpoint.url, HELLO_PATH, json.dumps({"nonce": nonce}).encode(), {})
    answer = json.loads(body)
    assert status == 200 and answer["url"] == endpoint.url
    assert answer["proof"] == proof(TOKEN, nonce, endpoint.url)
    assert answer["proof"] != proof(TOKEN, "f" * 32, endpoint.url)
    assert answer["proof"] != proof(TOKEN, nonce, "http://127.0.0.1:1")
    bad: Any
    for bad in ({"nonce": "short"}, {"nonce": nonce.upper()}, {"nonce": 5}, []):
        status, _ = raw(endpoint.url, HELLO_PATH, json.dumps(bad).encode(), {})
        assert status == 400, bad


BAD_ARGS: list[tuple[str, bytes]] = [
    ("NaN batch size", b'["b", "m", "t", "l", NaN]'),
    ("Infinity", b'["b", "m", "t", "l", Infinity]'),
    ("1e400", b'["b", "m", "t", "l", 1e400]'),
    ("1.5", b'["b", "m", "t", "l", 1.5]'),
    ("true", b'["b", "m", "t", "l", true]'),
    ("10^29", b'["b", "m", "t", "l", 100000000000000000000000000000]'),
    ("text batch size", b'["b", "m", "t", "l", "5"]'),
    ("60 KB name", json.dumps(["x" * 60_000, "m", "t", "l", 5]).encode()),
    ("name with a slash", b'["../b", "m", "t", "l", 5]'),
    ("file name .", b'["b", ".", "t", "l", 5]'),
    ("missing argument", b'["b", "m", "t", "l"]'),
    ("null file", b'["b", null, "t", "l", 5]'),
]


@pytest.mark.parametrize("case, args", BAD_ARGS, ids=[case for case, _ in BAD_ARGS])
def test_the_endpoint_refuses_what_the_cli_refuses_before_any_command_runs(
        endpoint: CommandEndpoint, jobs: Jobs, case: str, args: bytes) -> None:
    body = b'{"method": "job_add", "args": ' + args + b"}"
    if len(body) > 64 * 1024:
        status, answer = raw(endpoint.url, COMMAND_PATH, body, signed(body))
        assert status == 413
    else:
        status, answer = raw(endpoint.url, COMMAND_PATH, body, signed(body))
        assert status == 400, answer
        assert "\n" not in json.loads(answer)["error"]
    assert jobs.calls == []


def test_the_60_kb_name_is_refused_by_the_check_itself_not_only_by_the_body_limit(
        endpoint: CommandEndpoint, jobs: Jobs) -> None:
    with pytest.raises(ServiceError, match="^NAME: expected a name of 1-64"):
        send_command(endpoint.url, TOKEN, "job_add", ["x" * 20_000, "m", "t", "l", 5], 2.0)
    assert jobs.calls == []


def test_only_json_naming_a_served_command_reaches_the_handler(
        endpoint: CommandEndpoint, jobs: Jobs) -> None:
    pickled = pickle.dumps({"method": "job_status", "args": []})
    status, answer = raw(endpoint.url, COMMAND_PATH, pickled, signed(pickled))
    assert status == 400 and b"not JSON" in answer
    shutdown = json.dumps({"method": "shutdown"}).encode()
    status, answer = raw(endpoint.url, COMMAND_PATH, shutdown, signed(shutdown))
    assert status == 400 and json.loads(answer)["error"].startswith("method: expected one of")
    assert jobs.calls == []
    with pytest.raises(ServiceError, match="^job_status: takes 0 or 1 arguments"):
        send_command(endpoint.url, TOKEN, "job_status", ["a", "b"], 2.0)
    assert send_command(endpoint.url, TOKEN, "job_status", ["a"], 2.0)["jobs"] == {
        "a": {"state": "idle"}}
    with pytest.raises(ServiceError) as refused:
        send_command(endpoint.url, TOKEN, "job_status", ["ghost"], 2.0)
    assert str(refused.value) == "unknown job 'ghost' (jobs: a)"  # one line
    assert jobs.calls == [("job_status", ("a",)), ("job_status", ("ghost",))]


def test_a_taken_port_binds_another_one(jobs: Jobs, endpoint: CommandEndpoint) -> None:
    port = int(endpoint.url.rpartition(":")[2])
    second = CommandEndpoint(jobs.command, TOKEN, "127.0.0.1", port=port)
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


def test_the_cli_checks_a_command_before_sending_it(record: ServiceRecord,
                                                    endpoint: CommandEndpoint,
                                                    jobs: Jobs) -> None:
    publish_endpoint(LocalStorage(Path(record.store)), endpoint.url, incarnation=2)
    with pytest.raises(ServiceError, match="^--batch-size: expected an integer"):
        command("job_add", "b", "m", "t", "l", 0)
    assert jobs.calls == []


class Listener:
    """A forged endpoint on loopback: records every byte it receives; answers each request
    with `reply` (or relays it to `relay`, a real endpoint)."""

    def __init__(self, reply: bytes | None = None, relay: str | None = None,
                 change_answer: bool = False) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.received = b""
        self.reply = reply
        self.relay = relay
        self.change_answer = change_answer
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            with client:
                client.settimeout(3)
                try:
                    for _ in range(2):  # the hello, then what the client sends next
                        request = self._request(client)
                        if request is None:
                            break
                        client.sendall(self._answer(*request))
                except OSError:
                    pass

    def _request(self, client: socket.socket) -> tuple[bytes, bytes] | None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = client.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length")), b"0"))
        while len(body) < length:
            body += client.recv(65536)
        self.received += head + b"\r\n\r\n" + body
        return head, body

    def _answer(self, head: bytes, body: bytes) -> bytes:
        extra = ""
        if self.relay is not None:  # the real endpoint's proof, for the real URL
            path = head.split(b" ")[1].decode()
            headers = {line.split(b":", 1)[0].decode(): line.split(b":", 1)[1].strip().decode()
                       for line in head.split(b"\r\n")[1:] if b":" in line}
            status, answer, signature = _relayed(self.relay, path, body, headers)
            if self.change_answer and path == COMMAND_PATH:
                answer = answer.replace(b'"idle"', b'"done"')
            extra = f"{SIGNATURE_HEADER}: {signature}\r\n" if signature else ""
        else:
            status, answer = 200, self.reply or b""
        return (f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\n{extra}"
                f"Content-Length: {len(answer)}\r\n\r\n").encode() + answer

    def close(self) -> None:
        self.server.close()


def _relayed(url: str, path: str, body: bytes,
             headers: dict[str, str]) -> tuple[int, bytes, str]:
    """The request passed on to the real endpoint: its status, body and signature."""
    import http.client
    from urllib.parse import urlsplit

    where = urlsplit(url)
    connection = http.client.HTTPConnection(str(where.hostname), where.port, timeout=5)
    try:
        connection.request("POST", path, body=body, headers={
            key: value for key, value in headers.items() if key.lower() != "host"})
        response = connection.getresponse()
        return response.status, response.read(), response.getheader(SIGNATURE_HEADER, "")
    finally:
        connection.close()


FORGERIES = {
    "answers every request with ok": b'{"ok": true, "url": "x", "proof": "00"}',
    "claims its own url with a made-up proof": None,
    "relays the hello to the real endpoint": None,
}


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_a_forged_endpoint_record_gets_no_token(record: ServiceRecord,
                                                endpoint: CommandEndpoint,
                                                forgery: str) -> None:
    relay = endpoint.url if forgery.startswith("relays") else None
    listener = Listener(FORGERIES[forgery], relay)
    if forgery.startswith("claims"):
        listener.reply = json.dumps({"ok": True, "url": listener.url,
                                     "proof": proof("guess", "0" * 32, listener.url)}).encode()
    try:
        publish_endpoint(LocalStorage(Path(record.store)), listener.url, incarnation=9)
        with pytest.raises(ServiceError) as refused:
            command("job_status")
        assert "did not prove it holds the service's token" in str(refused.value)
        assert HELLO_PATH.encode() in listener.received  # it was asked, and only that
        assert TOKEN.encode() not in listener.received
        assert COMMAND_PATH.encode() not in listener.received
        assert ServiceRecord.load().command_url == record.command_url  # not its default
    finally:
        listener.close()


@pytest.mark.subprocess
def test_the_cli_refuses_a_forged_endpoint_in_one_line(record: ServiceRecord,
                                                       tmp_path: Path) -> None:
    listener = Listener(b'{"ok": true}')
    try:
        publish_endpoint(LocalStorage(Path(record.store)), listener.url, incarnation=9)
        done = subprocess.run([sys.executable, "-m", "invoke", "members"], cwd=REPO,
                              env={**os.environ, STATE_DIR_ENV: str(tmp_path / "state")},
                              capture_output=True, text=True, timeout=60)
    finally:
        listener.close()
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: the coordinator (incarnation 9) does not answer")
    assert "did not prove it holds the service's token" in done.stderr
    assert TOKEN.encode() not in listener.received


def test_the_endpoint_binds_the_nodes_ip_or_the_whole_pod_in_kubernetes() -> None:
    assert listen_host("10.0.3.7", {}) == "10.0.3.7"
    assert listen_host("10.0.3.7", {"KUBERNETES_SERVICE_HOST": "172.20.0.1"}) == "0.0.0.0"
