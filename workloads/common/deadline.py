"""A deadline on a call that may block on a socket (a server that accepts and never answers,
or drips its answer a byte at a time, defeats a socket's own timeout, which each byte
restarts), with Ctrl-C and SIGTERM honoured while it waits.

The call runs in a thread of its own; the caller waits for it and can always be interrupted.
When the caller stops waiting — the deadline passed, or an interrupt (KeyboardInterrupt, as
SIGTERM raises it in the project's tasks) arrived — every socket the call connected is shut
down, so the call ends at once instead of reading on: a caller that then closes a connection
the call was reading (http.client's close takes its reader's lock) is not held until the
server stops dripping, which may be never.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
ABANDONED_END_S = 2.0
"""How long an abandoned call is given to end once its sockets are shut down (it is left to
end on its own after that: a daemon thread never holds the process at exit)."""
ABANDON_POLL_S = 0.1
"""How often an abandoned call's sockets are shut down again while it has not ended."""


class DeadlineExceeded(TimeoutError):
    """The call did not return within its deadline (its sockets were shut down)."""


_calls = threading.local()
"""In a call's own thread: `sockets`, the sockets it connected."""
_hook_lock = threading.Lock()
_hooked = False


class _Sockets:
    """The sockets one call connected; once it is abandoned, it connects no more."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.connected: list[socket.socket] = []
        self.abandoned = False


def _note_connect(event: str, args: tuple[Any, ...]) -> None:
    """Audit hook: a socket connected in a call's thread is that call's (Python's audit
    event `socket.connect` is raised by every connect, whatever library makes it); an
    abandoned call's connect is refused (a hook's exception aborts the audited operation)."""
    if event == "socket.connect":
        sockets: _Sockets | None = getattr(_calls, "sockets", None)
        if sockets is not None and isinstance(args[0], socket.socket):
            with sockets.lock:
                if sockets.abandoned:
                    raise ConnectionAbortedError("the call was abandoned")
                sockets.connected.append(args[0])


def _watch_connects() -> None:
    global _hooked
    with _hook_lock:
        if not _hooked:
            sys.addaudithook(_note_connect)
            _hooked = True


def call_within(call: Callable[[], T], seconds: float) -> T:
    """`call()`'s result or its exception; DeadlineExceeded once `seconds` passed; a
    KeyboardInterrupt arriving meanwhile is raised at once. Either way the call's sockets are
    shut down before this returns (see the module docstring)."""
    _watch_connects()
    sockets = _Sockets()
    outcome: list[tuple[bool, Any]] = []

    def attempt() -> None:
        _calls.sockets = sockets
        outcome.append(_attempt(call))

    thread = threading.Thread(target=attempt, daemon=True, name="deadline")
    try:
        # an interrupt may arrive while start() waits for the thread, which may have
        # connected by then: abandoned like one arriving in join()
        thread.start()
        thread.join(seconds)  # interruptible: a signal's handler runs while it waits
    except BaseException:
        _abandon(thread, sockets)
        raise
    if not outcome:
        _abandon(thread, sockets)
        raise DeadlineExceeded(f"no answer within {seconds:g} s")
    ok, value = outcome[0]
    if not ok:
        raise value
    result: T = value
    return result


def _abandon(thread: threading.Thread, sockets: _Sockets) -> None:
    """Shut down what the call connected, refuse what it would connect next, and give it a
    moment to end (a socket listed just before its connect is shut down again after)."""
    with sockets.lock:
        sockets.abandoned = True
    ends_by = time.monotonic() + ABANDONED_END_S
    while True:
        for connected in list(sockets.connected):
            try:
                connected.shutdown(socket.SHUT_RDWR)
            except OSError:  # closed already, or not connected yet
                pass
        left_s = ends_by - time.monotonic()
        # not alive: ended, or interrupted in start() before it ran (it will connect nothing)
        if not thread.is_alive() or left_s <= 0:
            return
        thread.join(min(left_s, ABANDON_POLL_S))


def _attempt(call: Callable[[], Any]) -> tuple[bool, Any]:
    try:
        return True, call()
    except BaseException as error:  # handed over to the caller's thread
        return False, error
