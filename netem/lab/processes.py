"""The lab's processes and its short commands.

Every process the two-site lab starts carries the environment marker MARKER_ENV=<lab id>
(Ray passes it on to its daemons and workers); the lab stops a process only when it carries
that marker (`procs.stop_marked`), never because its PID was recorded or because it runs in
one of the lab's namespaces: a recorded PID may name another process by now. Starting and
stopping is `procs`' job; MARKER_ENV and marked_pids live there and are re-exported here.
"""

from __future__ import annotations

import subprocess

from procs import MARKER_ENV, marked_pids
from vocab.errors import RunFailed

__all__ = ["MARKER_ENV", "LabCommandError", "marked_pids", "run_checked"]


def run_checked(argv: list[str], what: str) -> str:
    """Run a short command; on failure raise with its stderr, naming what was attempted."""
    completed = subprocess.run(argv, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise LabCommandError(f"{what} failed: `{' '.join(argv)}` exited "
                              f"{completed.returncode}: {completed.stderr.strip()}")
    return completed.stdout


class LabCommandError(RunFailed, RuntimeError):
    """A command that builds or probes the lab failed."""
