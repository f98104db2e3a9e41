"""A local port forwarded by a helper process (kubectl, the SSM plugin), for as long as needed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import procs
from vocab.errors import UserError

READY_TIMEOUT_S = 60.0


class TunnelFailed(UserError, RuntimeError):
    """The forwarding process is missing or ended before it forwarded."""


@contextmanager
def tunnel(command: list[str], ready_text: str, needed_for: str) -> Iterator[None]:
    """Run `command` until it prints `ready_text`; yield; then stop it (by its PID)."""
    name = " ".join(command[:3])
    try:
        process = procs.spawn(command)
    except FileNotFoundError:
        raise TunnelFailed(f"{command[0]} is not installed (needed for {needed_for})") from None
    try:
        try:
            procs.wait_for_line(process, ready_text, timeout_s=READY_TIMEOUT_S, name=name)
        except procs.ProcessNotReady as error:
            raise TunnelFailed(f"{name} did not forward: {error}") from None
        yield
    finally:
        procs.stop(process)
