"""Stand-ins for CLIs this machine lacks (kubectl, aws): real executables on PATH that print
what the real tool prints when it is ready, record how they were called, and record how they
ended (SIGTERM from their owner), so a test sees the real process handling."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = '''#!{python}
import json, os, signal, sys, time
from pathlib import Path

record = Path({record!r})
argv = sys.argv[1:]
files = {{}}
if "--kubeconfig" in argv:
    config = Path(argv[argv.index("--kubeconfig") + 1])
    files = {{"kubeconfig": config.read_text(), "kubeconfig_mode": config.stat().st_mode & 0o777}}
with record.open("a") as out:
    out.write(json.dumps({{"event": "started", "argv": argv, **files}}) + "\\n")

def ended(signum, frame):
    with record.open("a") as out:
        out.write(json.dumps({{"event": "terminated"}}) + "\\n")
    sys.exit(0)

signal.signal(signal.SIGTERM, ended)
sys.stderr.write({stderr!r})
sys.stdout.write({stdout!r})
sys.stdout.flush()
exit_code = {exit_code!r}
if exit_code is not None:
    sys.exit(exit_code)
while True:
    time.sleep(1)
'''


class FakeCommand:
    """One fake executable; `calls()` are its runs in order, each with its events."""

    def __init__(self, bin_dir: Path, name: str, *, stdout: str = "", stderr: str = "",
                 exit_code: int | None = None) -> None:
        self.record = bin_dir / f"{name}.calls.jsonl"
        path = bin_dir / name
        path.write_text(SCRIPT.format(python=sys.executable, record=str(self.record),
                                      stdout=stdout, stderr=stderr, exit_code=exit_code))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)

    def events(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    def started(self) -> list[dict[str, Any]]:
        return [event for event in self.events() if event["event"] == "started"]

    def terminated(self) -> int:
        return sum(1 for event in self.events() if event["event"] == "terminated")


def fake_command(monkeypatch: pytest.MonkeyPatch, bin_dir: Path, name: str,
                 **behaviour: Any) -> FakeCommand:
    """Put a fake `name` first on PATH for this test."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    command = FakeCommand(bin_dir, name, **behaviour)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return command
