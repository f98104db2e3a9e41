"""The run tasks' progress watchdog: a run that prints no progress for `--stall-timeout`
seconds is stopped (one line, exit 1), and everything the task started is removed as on any
other failure.

Progress is a line the workload printed itself. Ray's own chatter does not count: a run whose
workers can never be placed logs the autoscaler's "No available node types can fulfill
resource requests" every minute forever, and a cluster losing nodes logs raylet warnings.
(Ray's C++ crash output never reaches the watchdog: `launch.ray_jobs` diverts it first.)
"""

from __future__ import annotations

import re
import time

from vocab.errors import RunFailed

DEFAULT_STALL_TIMEOUT_S = 900.0
STALL_FLAG = "--stall-timeout"

_RAY_CHATTER = re.compile(
    r"^\s*("
    r"\((autoscaler|raylet|gcs_server|monitor|dashboard)\b"  # Ray daemons' lines, prefixed
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\s+(DEBUG|INFO|WARNING|ERROR)\b"  # Ray's log format
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z] \d+ \d+\]"  # Ray's C++ log format
    r"|$)"
)


class RunStalled(RunFailed):
    """The run printed no progress for the stall timeout; it was stopped."""


def is_progress(line: str) -> bool:
    """A line the workload printed itself (not Ray's chatter, not blank)."""
    return _RAY_CHATTER.match(line) is None


class Watchdog:
    """Tracks the last progress line; `check()` raises RunStalled once none came in time."""

    def __init__(self, stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S) -> None:
        self.stall_timeout_s = stall_timeout_s
        self.last_progress = time.monotonic()

    def saw(self, line: str) -> None:
        if is_progress(line):
            self.last_progress = time.monotonic()

    def remaining_s(self) -> float:
        return self.last_progress + self.stall_timeout_s - time.monotonic()

    def check(self) -> None:
        if self.remaining_s() <= 0:
            raise RunStalled(f"the run printed no progress for {self.stall_timeout_s:g} s "
                             f"({STALL_FLAG}); it was stopped")
