"""The one spot-notice watcher: polls the instance metadata service (IMDSv2) for a spot
interruption notice and a rebalance recommendation, the same code on EC2 (169.254.169.254)
and in the local spot lab (each lab node's own endpoint, found through
`SPOTBURST_IMDS_ENDPOINT`). The notice agent (workloads/common/notice_agent.py) drains its
Ray node with it; a workload may watch for itself too.

IMDSv2: `PUT /latest/api/token` with a TTL header returns a session token; every read sends
it. `GET /latest/meta-data/spot/instance-action` answers 404 while there is no notice and
`{"action": "terminate"|"stop"|"hibernate", "time": "2026-01-01T00:00:00Z"}` once there is;
`GET /latest/meta-data/events/recommendations/rebalance` answers 404, then
`{"noticeTime": "2026-01-01T00:00:00Z"}`. An expired token answers 401: the watcher fetches a
new one and asks again, once. Times may carry fractions of a second (the lab's do: its
warning is compressed).
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from vocab.spot import (
    IMDS_ENDPOINT,
    IMDS_ENDPOINT_ENV,
    IMDS_INSTANCE_ACTION_PATH,
    IMDS_INSTANCE_ID_PATH,
    IMDS_REBALANCE_PATH,
    IMDS_TOKEN_HEADER,
    IMDS_TOKEN_PATH,
    IMDS_TOKEN_TTL_HEADER,
    NOTICE_ACTIONS,
)

DEFAULT_POLL_S = 5.0
DEFAULT_TIMEOUT_S = 2.0
DEFAULT_TOKEN_TTL_S = 21600
TOKEN_RENEW_MARGIN_S = 5.0


@dataclass(frozen=True)
class SpotNotice:
    """An interruption notice: what will happen to the instance, and when (UTC)."""

    action: str
    time: datetime

    def seconds_left(self, now: float | None = None) -> float:
        return self.time.timestamp() - (time.time() if now is None else now)


@dataclass(frozen=True)
class RebalanceRecommendation:
    """EC2 recommends moving off the instance (its capacity is at elevated risk): often
    minutes before an interruption, sometimes for an instance never interrupted."""

    time: datetime


class NoticeError(RuntimeError):
    """The metadata service could not be asked, or answered something unusable."""


class NoticeUnavailable(NoticeError):
    """No answer in time, a refused connection, or an unexpected HTTP status."""


class MalformedNotice(NoticeError):
    """The instance-action answer is not a notice (bad JSON, fields or action)."""


def default_endpoint() -> str:
    """The node's metadata endpoint: $SPOTBURST_IMDS_ENDPOINT in the lab, else EC2's."""
    return os.environ.get(IMDS_ENDPOINT_ENV) or IMDS_ENDPOINT


def parse_notice(body: bytes) -> SpotNotice:
    """The notice in an instance-action body; MalformedNotice names what is wrong."""
    document = _object("instance-action", body)
    action = document.get("action")
    if action not in NOTICE_ACTIONS:
        raise MalformedNotice(f"instance-action 'action' is {action!r}, not one of "
                              f"{', '.join(NOTICE_ACTIONS)}")
    return SpotNotice(action=action, time=_time("instance-action", "time", document))


def parse_rebalance(body: bytes) -> RebalanceRecommendation:
    """The recommendation in a rebalance body; MalformedNotice names what is wrong."""
    return RebalanceRecommendation(_time("rebalance", "noticeTime",
                                         _object("rebalance", body)))


def _object(what: str, body: bytes) -> dict[str, object]:
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise MalformedNotice(f"{what} body is not JSON: {body[:80]!r}") from None
    if not isinstance(document, dict):
        raise MalformedNotice(f"{what} body is not an object: {body[:80]!r}")
    return document


def _time(what: str, key: str, document: dict[str, object]) -> datetime:
    when = document.get(key)
    if not isinstance(when, str):
        raise MalformedNotice(f"{what} {key!r} is {when!r}, not a string")
    try:
        stamp = datetime.fromisoformat(when.replace("Z", "+00:00"))
    except ValueError:
        raise MalformedNotice(f"{what} {key!r} {when!r} is not an ISO 8601 time") from None
    if stamp.tzinfo is None:
        raise MalformedNotice(f"{what} {key!r} {when!r} has no time zone")
    return stamp.astimezone(UTC)


class NoticeWatcher:
    """Polls one metadata endpoint; `check()` once, `wait()` until a notice, or
    `watch(callback)` in a background thread."""

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        token_ttl_s: int = DEFAULT_TOKEN_TTL_S,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if not 1 <= token_ttl_s <= DEFAULT_TOKEN_TTL_S:
            raise ValueError(f"token_ttl_s must be in 1..{DEFAULT_TOKEN_TTL_S}, got {token_ttl_s}")
        self.endpoint = (endpoint or default_endpoint()).rstrip("/")
        self.timeout_s = timeout_s
        self.token_ttl_s = token_ttl_s
        self._token: str | None = None
        self._token_renew_at = 0.0
        self.tokens_fetched = 0
        # Never through an HTTP proxy from the environment: the metadata service is local.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def check(self) -> SpotNotice | None:
        """Ask once: the notice, or None while there is none."""
        body = self._read(IMDS_INSTANCE_ACTION_PATH)
        return None if body is None else parse_notice(body)

    def check_rebalance(self) -> RebalanceRecommendation | None:
        """Ask once: the rebalance recommendation, or None while there is none."""
        body = self._read(IMDS_REBALANCE_PATH)
        return None if body is None else parse_rebalance(body)

    def instance_id(self) -> str:
        """The instance's id (on the lab: the node's name)."""
        body = self._read(IMDS_INSTANCE_ID_PATH)
        if body is None or not body.strip():
            raise NoticeUnavailable(f"{self.endpoint}{IMDS_INSTANCE_ID_PATH} has no instance id")
        return body.decode(errors="replace").strip()

    def _read(self, path: str) -> bytes | None:
        """The body at `path`, None for 404; a 401 renews the token and asks once more."""
        status, body = self._get(path, self._current_token())
        if status == 401:  # the token expired (or the service restarted): renew once
            self._token = None
            status, body = self._get(path, self._current_token())
        if status == 404:
            return None
        if status != 200:
            raise NoticeUnavailable(f"{self.endpoint}{path} answered HTTP {status}")
        return body

    def wait(
        self,
        poll_s: float = DEFAULT_POLL_S,
        stop: threading.Event | None = None,
        on_error: Callable[[NoticeError], None] | None = None,
    ) -> SpotNotice | None:
        """Poll every `poll_s` until a notice (returned) or `stop` is set (None). Errors are
        passed to `on_error` and polling goes on: a metadata hiccup is not a notice."""
        stop = stop or threading.Event()
        while not stop.is_set():
            try:
                notice = self.check()
            except NoticeError as error:
                if on_error is not None:
                    on_error(error)
            else:
                if notice is not None:
                    return notice
            stop.wait(poll_s)
        return None

    def watch(
        self,
        callback: Callable[[SpotNotice], None],
        poll_s: float = DEFAULT_POLL_S,
        on_error: Callable[[NoticeError], None] | None = None,
    ) -> threading.Event:
        """Call `callback(notice)` once from a daemon thread when a notice appears; returns
        the event that stops the watching."""
        stop = threading.Event()

        def run() -> None:
            notice = self.wait(poll_s, stop, on_error)
            if notice is not None:
                callback(notice)

        threading.Thread(target=run, name="spot-notice-watcher", daemon=True).start()
        return stop

    def _current_token(self) -> str:
        if self._token is None or time.monotonic() >= self._token_renew_at:
            request = urllib.request.Request(
                self.endpoint + IMDS_TOKEN_PATH,
                method="PUT",
                headers={IMDS_TOKEN_TTL_HEADER: str(self.token_ttl_s)},
            )
            status, body = self._send(request)
            if status != 200 or not body.strip():
                raise NoticeUnavailable(f"{self.endpoint}{IMDS_TOKEN_PATH} answered HTTP "
                                        f"{status} without a token")
            self._token = body.decode(errors="replace").strip()
            self._token_renew_at = time.monotonic() + max(
                self.token_ttl_s - TOKEN_RENEW_MARGIN_S, self.token_ttl_s / 2
            )
            self.tokens_fetched += 1
        return self._token

    def _get(self, path: str, token: str) -> tuple[int, bytes]:
        request = urllib.request.Request(self.endpoint + path,
                                         headers={IMDS_TOKEN_HEADER: token})
        return self._send(request)

    def _send(self, request: urllib.request.Request) -> tuple[int, bytes]:
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            reason = getattr(error, "reason", error)
            raise NoticeUnavailable(f"{request.full_url} did not answer within "
                                    f"{self.timeout_s:g} s: {reason}") from None
