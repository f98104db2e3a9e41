"""The one notice watcher against a lab node's metadata endpoint (IMDSv2 semantics)."""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from spotlab.endpoint import (
    MAX_CONNECTIONS,
    MAX_TOKENS,
    READ_TIMEOUT_S,
    NoticeEndpoint,
    notice_time,
)
from tests.helpers.waiting import wait_until
from vocab.spot import (
    IMDS_ENDPOINT,
    IMDS_ENDPOINT_ENV,
    IMDS_INSTANCE_ACTION_PATH,
    IMDS_TOKEN_HEADER,
    IMDS_TOKEN_PATH,
    IMDS_TOKEN_TTL_HEADER,
)
from workloads.common.spot_notice import (
    MalformedNotice,
    NoticeUnavailable,
    NoticeWatcher,
    SpotNotice,
    default_endpoint,
    parse_notice,
)


@pytest.fixture
def endpoint() -> Iterator[NoticeEndpoint]:
    with NoticeEndpoint() as served:
        yield served


def test_no_notice_is_404_then_the_notice_appears(endpoint: NoticeEndpoint) -> None:
    watcher = NoticeWatcher(endpoint.url)
    assert watcher.check() is None
    deadline = time.time() + 120
    endpoint.post_notice(deadline)
    notice = watcher.check()
    assert notice is not None and notice.action == "terminate"
    assert notice.time.timestamp() == pytest.approx(int(deadline))
    assert notice.seconds_left() == pytest.approx(120, abs=1.5)
    assert watcher.tokens_fetched == 1  # one session token for both reads


def test_an_expired_token_is_refused_and_renewed(endpoint: NoticeEndpoint) -> None:
    watcher = NoticeWatcher(endpoint.url, token_ttl_s=1)
    assert watcher.check() is None
    stale = watcher._token
    time.sleep(1.1)  # the token's TTL runs out on the endpoint
    watcher._token_renew_at = float("inf")  # and the watcher does not know it
    assert watcher.check() is None  # 401, then a fresh token, then 404
    assert watcher.tokens_fetched == 2 and watcher._token != stale


def test_the_endpoint_speaks_imdsv2(endpoint: NoticeEndpoint) -> None:
    import urllib.error
    import urllib.request

    def status(request: urllib.request.Request) -> int:
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            return error.code

    action = endpoint.url + "/latest/meta-data/spot/instance-action"
    assert status(urllib.request.Request(action)) == 401  # no token: IMDSv1 is refused
    assert status(urllib.request.Request(action, headers={
        "X-aws-ec2-metadata-token": "made-up"})) == 401
    token_url = endpoint.url + "/latest/api/token"
    assert status(urllib.request.Request(token_url, method="PUT")) == 400  # no TTL
    assert status(urllib.request.Request(token_url, method="PUT", headers={
        "X-aws-ec2-metadata-token-ttl-seconds": "99999"})) == 400


def test_a_slow_endpoint_is_a_timeout_not_a_notice(endpoint: NoticeEndpoint) -> None:
    endpoint.delay_s = 0.5
    with pytest.raises(NoticeUnavailable, match="did not answer within 0.2 s"):
        NoticeWatcher(endpoint.url, timeout_s=0.2).check()


def test_nothing_listening_is_unavailable() -> None:
    with NoticeEndpoint() as gone:
        url = gone.url
    with pytest.raises(NoticeUnavailable):
        NoticeWatcher(url, timeout_s=0.5).check()


@pytest.mark.parametrize("body, message", [
    (b"<html>maintenance</html>", "not JSON"),
    (b'["terminate"]', "not an object"),
    (b'{"action": "reboot", "time": "2026-01-01T00:00:00Z"}', "'action' is 'reboot'"),
    (b'{"action": "terminate", "time": "soon"}', "not an ISO 8601 time"),
    (b'{"action": "terminate"}', "'time' is None"),
])
def test_a_body_that_is_not_a_notice_is_malformed(endpoint: NoticeEndpoint, body: bytes,
                                                  message: str) -> None:
    endpoint.raw_body = body
    with pytest.raises(MalformedNotice, match=message):
        NoticeWatcher(endpoint.url).check()


def test_wait_reports_errors_and_keeps_polling(endpoint: NoticeEndpoint) -> None:
    endpoint.raw_body = b"garbage"
    errors: list[Exception] = []
    seen = threading.Event()
    notices: list[SpotNotice] = []

    def on_notice(notice: SpotNotice) -> None:
        notices.append(notice)
        seen.set()

    stop = NoticeWatcher(endpoint.url).watch(on_notice, poll_s=0.05, on_error=errors.append)
    try:
        while not errors:
            time.sleep(0.01)
        endpoint.raw_body = None
        endpoint.post_notice(time.time() + 5, action="stop")
        assert seen.wait(5)
    finally:
        stop.set()
    assert isinstance(errors[0], MalformedNotice) and notices[0].action == "stop"


def test_the_endpoint_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IMDS_ENDPOINT_ENV, raising=False)
    assert default_endpoint() == IMDS_ENDPOINT == "http://169.254.169.254"
    monkeypatch.setenv(IMDS_ENDPOINT_ENV, "http://127.0.0.1:1234")
    assert NoticeWatcher().endpoint == "http://127.0.0.1:1234"


def test_notice_time_round_trips() -> None:
    body = f'{{"action": "terminate", "time": "{notice_time(1_800_000_000.7)}"}}'.encode()
    assert parse_notice(body).time.timestamp() == 1_800_000_000


def half_sent(endpoint: NoticeEndpoint, count: int) -> list[socket.socket]:
    """Connections that send the start of a request and never its end."""
    connections = []
    for _ in range(count):
        connection = socket.create_connection(("127.0.0.1", endpoint.port), timeout=10)
        connection.sendall(f"GET {IMDS_INSTANCE_ACTION_PATH} HTTP/1.1\r\nHost: x\r\n".encode())
        connections.append(connection)
    return connections


def put_token(url: str) -> str:
    request = urllib.request.Request(url + IMDS_TOKEN_PATH, method="PUT",
                                     headers={IMDS_TOKEN_TTL_HEADER: "60"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return str(response.read().decode())


def get_status(url: str, token: str) -> int:
    request = urllib.request.Request(url + IMDS_INSTANCE_ACTION_PATH,
                                     headers={IMDS_TOKEN_HEADER: token})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_half_sent_requests_are_cut_off_and_the_endpoint_still_answers(
        endpoint: NoticeEndpoint) -> None:
    stalled = half_sent(endpoint, 20)
    try:
        wait_until(lambda: endpoint.connections == 20, 10, "20 connections held")
        assert NoticeWatcher(endpoint.url, timeout_s=2).check() is None  # answered meanwhile
        for connection in stalled:  # closed by the endpoint, without an answer
            connection.settimeout(READ_TIMEOUT_S + 10)
            assert connection.recv(1024) == b""
        wait_until(lambda: endpoint.connections == 0, 10, "every handler thread freed")
    finally:
        for connection in stalled:
            connection.close()


def test_connections_past_the_cap_are_turned_away(endpoint: NoticeEndpoint) -> None:
    stalled = half_sent(endpoint, MAX_CONNECTIONS)
    try:
        wait_until(lambda: endpoint.connections == MAX_CONNECTIONS, 10, "the cap reached")
        extra = half_sent(endpoint, 1)[0]
        stalled.append(extra)
        assert extra.recv(1024) == b""  # closed at once: the others still hold their slots
        assert endpoint.connections == MAX_CONNECTIONS
    finally:
        for connection in stalled:
            connection.close()
    wait_until(lambda: endpoint.connections == 0, READ_TIMEOUT_S + 10, "the slots freed")
    assert NoticeWatcher(endpoint.url, timeout_s=2).check() is None


def test_tokens_past_the_cap_retire_the_oldest(endpoint: NoticeEndpoint) -> None:
    tokens = [put_token(endpoint.url) for _ in range(MAX_TOKENS + 5)]
    assert endpoint.tokens_held == MAX_TOKENS
    assert [get_status(endpoint.url, token) for token in tokens[:5]] == [401] * 5
    assert get_status(endpoint.url, tokens[5]) == 404  # still valid: no notice yet
    assert get_status(endpoint.url, tokens[-1]) == 404
