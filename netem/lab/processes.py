"""Starting the lab's processes and stopping exactly those, never anything else.

Every process the lab starts carries the environment marker SPOTBURST_LAB=<lab id>, which
Ray passes on to its daemons and workers; a lab's processes are the recorded PIDs, every
process carrying its marker, and (netns lab) every process inside its namespaces.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

MARKER_ENV = "SPOTBURST_LAB"


def spawn(argv: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start `argv` in its own session (a terminal's Ctrl-C reaches only the lab's owner)."""
    with log_path.open("ab") as log:
        return subprocess.Popen(
            argv,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


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


def is_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone; our own children are reaped)."""
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    except ChildProcessError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def terminate(pids: Iterable[int], grace_s: float = 15.0) -> set[int]:
    """SIGTERM, wait up to `grace_s`, then SIGKILL; returns the PIDs still alive after that."""
    remaining = {pid for pid in pids if is_alive(pid)}
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        for pid in remaining:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while remaining and time.monotonic() < deadline:
            remaining = {pid for pid in remaining if is_alive(pid)}
            if remaining:
                time.sleep(0.1)
        if not remaining:
            break
    return remaining


def run_checked(argv: list[str], what: str) -> str:
    """Run a short command; on failure raise with its stderr, naming what was attempted."""
    completed = subprocess.run(argv, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise LabCommandError(f"{what} failed: `{' '.join(argv)}` exited "
                              f"{completed.returncode}: {completed.stderr.strip()}")
    return completed.stdout


class LabCommandError(RuntimeError):
    """A command that builds or probes the lab failed."""
