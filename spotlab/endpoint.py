"""A lab node's instance metadata endpoint: the IMDSv2 subset a spot notice watcher uses.

`PUT /latest/api/token` with `X-aws-ec2-metadata-token-ttl-seconds: 1..21600` returns a
session token (400 without a valid TTL); `GET /latest/meta-data/spot/instance-action` with
`X-aws-ec2-metadata-token` returns 404 until a notice is posted, then
`{"action": "terminate", "time": "...Z"}`; a missing, unknown or expired token gets 401, as
on EC2. Served on loopback, one port per node, from a thread of the lab's supervisor.

Bounded, as a process that lives as long as the lab: a connection that has not sent its
whole request within READ_TIMEOUT_S is closed (its thread freed), at most MAX_CONNECTIONS are
served at once (more are closed at once), and at most MAX_TOKENS tokens are valid at a time:
a new one past that retires the oldest (whose holder gets 401 and asks again, as the watcher
does after any 401).

For the watcher's tests the endpoint can also answer slowly (`delay_s`) or with a body that
is not a notice (`raw_body`).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from vocab.spot import (
    IMDS_INSTANCE_ACTION_PATH,
    IMDS_TOKEN_HEADER,
    IMDS_TOKEN_PATH,
    IMDS_TOKEN_TTL_HEADER,
    NOTICE_ACTIONS,
)

MAX_TOKEN_TTL_S = 21600
READ_TIMEOUT_S = 2.0
MAX_CONNECTIONS = 32
MAX_TOKENS = 64


def notice_time(epoch_s: float) -> str:
    """AWS's notice time format: UTC, whole seconds, a trailing Z."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class NoticeEndpoint:
    """One node's metadata endpoint on 127.0.0.1:`port` (0 picks a free port)."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        self._lock = threading.Lock()
        self._tokens: dict[str, float] = {}  # token -> expiry (monotonic)
        self._notice: bytes | None = None
        self.delay_s = 0.0
        self.raw_body: bytes | None = None
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            timeout = READ_TIMEOUT_S  # a request line or header not sent by then: closed

            def do_PUT(self) -> None:  # noqa: N802 - http.server's naming
                endpoint._pause()
                if self.path != IMDS_TOKEN_PATH:
                    self._answer(404, b"")
                    return
                ttl = endpoint._ttl(self.headers.get(IMDS_TOKEN_TTL_HEADER))
                if ttl is None:
                    self._answer(400, b"")
                    return
                self._answer(200, endpoint._new_token(ttl).encode())

            def do_GET(self) -> None:  # noqa: N802
                endpoint._pause()
                if self.path == IMDS_TOKEN_PATH:
                    self._answer(405, b"")
                    return
                if not endpoint._token_valid(self.headers.get(IMDS_TOKEN_HEADER)):
                    self._answer(401, b"")
                    return
                if self.path != IMDS_INSTANCE_ACTION_PATH:
                    self._answer(404, b"")
                    return
                body = endpoint._instance_action()
                self._answer(404, b"") if body is None else self._answer(200, body)

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = _BoundedServer((host, port), Handler)
        self.port: int = self._server.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"notice-endpoint-{self.port}",
            daemon=True,
        )
        self._thread.start()

    def post_notice(self, deadline_epoch_s: float, action: str = "terminate") -> None:
        """From now on instance-action announces `action` at `deadline_epoch_s`."""
        if action not in NOTICE_ACTIONS:
            raise ValueError(f"action {action!r} is not one of {', '.join(NOTICE_ACTIONS)}")
        body = json.dumps({"action": action, "time": notice_time(deadline_epoch_s)})
        with self._lock:
            self._notice = body.encode()

    def clear_notice(self) -> None:
        with self._lock:
            self._notice = None

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> NoticeEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _pause(self) -> None:
        if self.delay_s > 0:
            time.sleep(self.delay_s)

    @staticmethod
    def _ttl(header: str | None) -> int | None:
        try:
            ttl = int(header or "")
        except ValueError:
            return None
        return ttl if 1 <= ttl <= MAX_TOKEN_TTL_S else None

    def _new_token(self, ttl_s: int) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            now = time.monotonic()
            self._tokens = {t: exp for t, exp in self._tokens.items() if exp > now}
            while len(self._tokens) >= MAX_TOKENS:
                del self._tokens[next(iter(self._tokens))]  # the oldest (insertion order)
            self._tokens[token] = now + ttl_s
        return token

    @property
    def tokens_held(self) -> int:
        with self._lock:
            return len(self._tokens)

    @property
    def connections(self) -> int:
        """Connections being served now."""
        return self._server.active

    def _token_valid(self, token: str | None) -> bool:
        with self._lock:
            expiry = self._tokens.get(token or "")
        return expiry is not None and time.monotonic() < expiry

    def _instance_action(self) -> bytes | None:
        with self._lock:
            return self.raw_body if self.raw_body is not None else self._notice


class _BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most MAX_CONNECTIONS at a time: one past that is closed
    without an answer."""

    daemon_threads = True
    request_queue_size = MAX_CONNECTIONS  # the listen backlog: a burst is accepted, not retried

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._count_lock = threading.Lock()
        self.active = 0
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        with self._count_lock:
            self.active += 1
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _release(self) -> None:
        with self._count_lock:
            self.active -= 1
        self._slots.release()
