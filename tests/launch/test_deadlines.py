"""Every network call has a deadline: a server on loopback that accepts and never answers, or
drips its answer a byte at a time (which restarts a socket's own timeout), ends the Jobs API
client's and the boto3 clients' calls within their documented time, in one line naming the
endpoint; an address that answers HTML is no Ray dashboard, in one line. The deadlines are
shortened here (module constants) so the test waits seconds, not minutes."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from launch import ray_jobs
from launch.errors import project_error
from launch.options import AWS_STACK_SPEC, FETCH_PRICES_SPEC
from launch.spot_prices import fetch_spot_prices
from tests.helpers.peers import LoopbackServer
from workloads.common import aws_client
from workloads.common.options import OptionError

PROJECT_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[LoopbackServer]:
    running = LoopbackServer(request.param)
    try:
        yield running
    finally:
        running.close()


@pytest.mark.slow  # seconds of waiting on the deadlines
@pytest.mark.parametrize("server", ["silent", "drip"], indirect=True)
def test_the_jobs_client_gives_up_on_a_silent_or_dripping_dashboard_naming_it(
        server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_jobs, "HTTP_READ_TIMEOUT_S", 1.0)
    monkeypatch.setattr(ray_jobs, "HTTP_DEADLINE_S", 3.0)
    started = time.monotonic()
    with pytest.raises(ray_jobs.ClusterUnreachable) as failed:
        ray_jobs.jobs_client(server.url, None)
    assert time.monotonic() - started < 3.0 + 5.0
    message = str(failed.value)
    assert server.url in message and "\n" not in message
    if server.mode == "drip":  # the read timeout never fired: each byte restarts it
        assert "did not answer GET /api/version within 3 s" in message


@pytest.mark.parametrize("server", ["html"], indirect=True)
def test_an_address_that_answers_html_is_no_ray_dashboard(server: LoopbackServer) -> None:
    with pytest.raises(ray_jobs.ClusterUnreachable) as failed:
        ray_jobs.jobs_client(server.url, None)
    assert str(failed.value).startswith(f"no Ray dashboard answers at {server.url} (")
    assert "\n" not in str(failed.value)


@pytest.mark.slow  # seconds of waiting on the deadlines
@pytest.mark.parametrize("server", ["silent", "drip"], indirect=True)
def test_a_boto3_call_gives_up_on_a_silent_or_dripping_endpoint_in_one_line(
        server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(aws_client, "READ_TIMEOUT_S", 1.0)
    monkeypatch.setattr(aws_client, "ATTEMPT_DEADLINE_S", 2.0)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    started = time.monotonic()
    with pytest.raises(Exception) as failed:  # noqa: PT011 - botocore's, turned into ours below
        fetch_spot_prices("c5.xlarge", "us-east-1", 1, tmp_path / "prices.json",
                          endpoint_url=server.url)
    elapsed = time.monotonic() - started
    assert elapsed < aws_client.MAX_ATTEMPTS * 2.0 + 20.0, elapsed
    error = project_error(failed.value)
    assert error is not None, repr(failed.value)
    assert server.url in str(error) and "\n" not in str(error)
    assert not (tmp_path / "prices.json").exists()


def test_the_documented_deadlines_add_up() -> None:
    assert aws_client.UNANSWERED_S == aws_client.MAX_ATTEMPTS * aws_client.ATTEMPT_DEADLINE_S \
        + aws_client.RETRY_BACKOFF_S < 30.0
    assert aws_client.READ_TIMEOUT_S < aws_client.ATTEMPT_DEADLINE_S
    assert ray_jobs.HTTP_CONNECT_TIMEOUT_S + ray_jobs.HTTP_READ_TIMEOUT_S \
        <= ray_jobs.HTTP_DEADLINE_S < 30.0
    config = aws_client.client_config()
    assert (config.connect_timeout, config.read_timeout) == (5.0, 10.0)
    assert config.retries == {"total_max_attempts": 2, "mode": "standard"}


@pytest.mark.parametrize("url", ["not a url", "ftp://example.com", "http://", "localhost:5000",
                                 "http://127.0.0.1:99999"])
def test_an_endpoint_that_is_not_a_url_is_refused_at_the_flag(url: str) -> None:
    for spec in (FETCH_PRICES_SPEC, AWS_STACK_SPEC):
        with pytest.raises(OptionError, match="^--endpoint-url: expected http"):
            spec.from_text({"endpoint_url": url})


@pytest.mark.subprocess
@pytest.mark.parametrize("server", ["html"], indirect=True)
def test_run_doll_at_an_address_that_answers_html_is_one_line(server: LoopbackServer,
                                                              tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "invoke", "run-doll", "--address", server.url,
                           "--out", str(tmp_path / "never")], cwd=PROJECT_DIR,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-800:]
    assert done.stderr.startswith(f"error: --address: no Ray dashboard answers at {server.url}")
    assert done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "never").exists()


@pytest.mark.slow  # seconds of waiting on the deadlines
@pytest.mark.parametrize("server", ["silent", "drip"], indirect=True)
def test_a_service_command_gives_up_on_a_silent_or_dripping_endpoint_naming_it(
        server: LoopbackServer) -> None:
    from workloads.inference.endpoint import EndpointUnreachable, send_command

    started = time.monotonic()
    with pytest.raises(EndpointUnreachable) as failed:
        send_command(server.url, "token", "job_status", [], timeout_s=1.0)
    assert time.monotonic() - started < 1.0 + 5.0
    assert str(failed.value).startswith(f"no answer from {server.url} within 1 s")


@pytest.mark.parametrize("server", ["drip-body"], indirect=True)
def test_an_abandoned_call_lets_go_of_the_connection_it_was_reading(
        server: LoopbackServer) -> None:
    """A body dripped forever: past the deadline, the caller closes the connection at once
    (http.client's close waits for the reader's lock, which the call held until the server
    stopped: never), because call_within shut down the call's socket."""
    import http.client

    from workloads.common.deadline import DeadlineExceeded, call_within

    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)

    def read_all() -> bytes:
        connection.request("GET", "/")
        return connection.getresponse().read()

    with pytest.raises(DeadlineExceeded):
        call_within(read_all, 1.0)
    closing = threading.Thread(target=connection.close, daemon=True)
    closing.start()
    closing.join(5.0)
    assert not closing.is_alive(), "close() is held by the abandoned read"


@pytest.mark.parametrize("server", ["drip-body"], indirect=True)
def test_an_interrupt_while_the_call_starts_abandons_it_too(
        server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C or SIGTERM may land while start() waits for the call's thread, which on a
    loaded machine has connected and is reading by then: the call is abandoned as in join()
    (it was not, and closing its connection then waited on the dripping read forever)."""
    import http.client

    from workloads.common import deadline

    reading = threading.Event()
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)

    def read_all() -> bytes:
        connection.request("GET", "/")
        response = connection.getresponse()
        reading.set()
        return response.read()

    class InterruptedInStart(threading.Thread):
        def start(self) -> None:
            super().start()
            if self.name == "deadline":
                assert reading.wait(10)
                raise KeyboardInterrupt

    monkeypatch.setattr(deadline.threading, "Thread", InterruptedInStart)
    with pytest.raises(KeyboardInterrupt):
        deadline.call_within(read_all, 30.0)
    closing = threading.Thread(target=connection.close, daemon=True)
    closing.start()
    closing.join(5.0)
    assert not closing.is_alive(), "close() is held by the read the interrupt left running"


@pytest.mark.parametrize("server", ["drip-body"], indirect=True)
def test_a_call_abandoned_before_it_connects_connects_nothing(server: LoopbackServer) -> None:
    import socket

    from workloads.common.deadline import DeadlineExceeded, call_within

    go, ended = threading.Event(), threading.Event()
    raised: list[BaseException] = []

    def connect_late() -> None:
        go.wait(10)
        try:
            socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
        except BaseException as error:
            raised.append(error)
            raise
        finally:
            ended.set()

    with pytest.raises(DeadlineExceeded):
        call_within(connect_late, 0.2)
    go.set()
    assert ended.wait(10)
    assert raised and isinstance(raised[0], ConnectionAbortedError), raised
    assert not server.accepted.is_set()
