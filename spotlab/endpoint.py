"""A lab node's instance metadata endpoint: the IMDSv2 subset a spot notice watcher uses.

`PUT /latest/api/token` with `X-aws-ec2-metadata-token-ttl-seconds: 1..21600` returns a
session token (400 without a valid TTL); `GET /latest/meta-data/spot/instance-action` with
`X-aws-ec2-metadata-token` returns 404 until a notice is posted, then
`{"action": "terminate", "time": "...Z"}`; a missing, unknown or expired token gets 401, as
on EC2. Served on loopback, one port per node, from a thread of the lab's supervisor.

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

from vocab.spot import (
    IMDS_INSTANCE_ACTION_PATH,
    IMDS_TOKEN_HEADER,
    IMDS_TOKEN_PATH,
    IMDS_TOKEN_TTL_HEADER,
    NOTICE_ACTIONS,
)

MAX_TOKEN_TTL_S = 21600


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

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
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
            self._tokens[token] = now + ttl_s
        return token

    def _token_valid(self, token: str | None) -> bool:
        with self._lock:
            expiry = self._tokens.get(token or "")
        return expiry is not None and time.monotonic() < expiry

    def _instance_action(self) -> bytes | None:
        with self._lock:
            return self.raw_body if self.raw_body is not None else self._notice
