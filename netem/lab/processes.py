"""Finding and stopping the lab's processes, never anything else; the lab's short commands.

Every process the lab starts carries the environment marker SPOTBURST_LAB=<lab id>, which
Ray passes on to its daemons and workers; a lab's processes are the recorded PIDs, every
process carrying its marker, and every process inside its namespaces. Starting and stopping
them is `procs`' job.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from vocab.errors import RunFailed

MARKER_ENV = "SPOTBURST_LAB"


def marked_pids(lab_id: str) -> set[int]:
    """PIDs of live processes whose environment carries this lab's marker."""
    needle = f"{MARKER_ENV}={lab_id}".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.add(int(entry.name))
    return found


def run_checked(argv: list[str], what: str) -> str:
    """Run a short command; on failure raise with its stderr, naming what was attempted."""
    completed = subprocess.run(argv, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise LabCommandError(f"{what} failed: `{' '.join(argv)}` exited "
                              f"{completed.returncode}: {completed.stderr.strip()}")
    return completed.stdout


class LabCommandError(RunFailed, RuntimeError):
    """A command that builds or probes the lab failed."""
