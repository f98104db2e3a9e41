"""A deadline on a call that may block on a socket (a server that accepts and never answers,
or drips its answer a byte at a time, defeats a socket's own timeout, which each byte
restarts)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class DeadlineExceeded(TimeoutError):
    """The call did not return within its deadline (it is left to end on its own)."""


def call_within(call: Callable[[], T], seconds: float) -> T:
    """`call()`'s result or its exception, or DeadlineExceeded once `seconds` passed. The call
    runs in a daemon thread, so one stuck on a socket never holds the process at exit."""
    outcome: list[tuple[bool, Any]] = []
    thread = threading.Thread(target=lambda: outcome.append(_attempt(call)), daemon=True,
                              name="deadline")
    thread.start()
    thread.join(seconds)
    if not outcome:
        raise DeadlineExceeded(f"no answer within {seconds:g} s")
    ok, value = outcome[0]
    if not ok:
        raise value
    result: T = value
    return result


def _attempt(call: Callable[[], Any]) -> tuple[bool, Any]:
    try:
        return True, call()
    except BaseException as error:  # handed over to the caller's thread
        return False, error
