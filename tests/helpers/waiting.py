"""Waiting on a condition in a test: polled, with a deadline and a message naming what did
not happen (never a bare sleep as synchronisation)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(condition: Callable[[], Any], timeout_s: float, what: str,
               poll_s: float = 0.1) -> Any:
    """The condition's first truthy value; AssertionError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"{what} not within {timeout_s:g} s")
