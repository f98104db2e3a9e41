"""A local port forwarded by a helper process (kubectl, the SSM plugin), for as long as needed."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from netem.ports import free_local_port

__all__ = ["TunnelFailed", "free_local_port", "tunnel"]

READY_TIMEOUT_S = 60.0


class TunnelFailed(RuntimeError):
    """The forwarding process is missing or ended before it forwarded."""


@contextmanager
def tunnel(command: list[str], ready_text: str, needed_for: str) -> Iterator[None]:
    """Run `command` until it prints `ready_text`; yield; then stop it (by its PID)."""
    try:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    except FileNotFoundError:
        raise TunnelFailed(f"{command[0]} is not installed (needed for {needed_for})") from None
    try:
        _wait_until_ready(process, ready_text, " ".join(command[:3]))
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_ready(process: subprocess.Popen[str], ready_text: str, name: str) -> None:
    timer = threading.Timer(READY_TIMEOUT_S, process.kill)
    timer.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if ready_text in line:
                # keep draining, or the process blocks once its output fills the pipe
                threading.Thread(target=process.stdout.read, daemon=True).start()
                return
    finally:
        timer.cancel()
    error = process.stderr.read() if process.stderr else ""
    raise TunnelFailed(f"{name} ended before forwarding: {error.strip()}")
