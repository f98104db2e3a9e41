"""The process helper against real child processes."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from procs import ProcessNotReady, follow, is_alive, running, spawn, stop, wait_for_line
from tests.helpers.waiting import wait_until

PY = sys.executable

pytestmark = [pytest.mark.subprocess]


def test_running_yields_the_ready_line_and_stops_the_process() -> None:
    script = "import time; print('noise'); print('READY at 42', flush=True); time.sleep(60)"
    with running([PY, "-c", script], "READY", timeout_s=10, name="child") as (process, line):
        assert line.strip() == "READY at 42"
        assert is_alive(process.pid)
    assert not is_alive(process.pid)


def test_a_process_that_ignores_sigterm_is_killed() -> None:
    script = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('up', flush=True); time.sleep(60)"
    )
    process = spawn([PY, "-c", script])
    wait_for_line(process, "up", timeout_s=10, name="stubborn")
    stop(process, grace_s=0.5)
    assert process.returncode == -9


def test_exit_before_ready_names_the_process_and_its_stderr() -> None:
    script = "import sys; sys.stderr.write('bad flag --x'); sys.exit(3)"
    with pytest.raises(ProcessNotReady, match=r"tunnel exited 3: bad flag --x"):
        with running([PY, "-c", script], "READY", timeout_s=10, name="tunnel"):
            pass


def test_silence_past_the_timeout_is_reported_and_the_process_is_gone() -> None:
    process = spawn([PY, "-c", "import time; time.sleep(60)"])
    with pytest.raises(ProcessNotReady, match="not ready within 0.5 s"):
        wait_for_line(process, "READY", timeout_s=0.5, name="sleeper")
    assert not is_alive(process.pid)


def test_without_drain_the_caller_reads_what_follows_the_ready_line() -> None:
    script = "print('ready', flush=True); print('result 7')"
    process = spawn([PY, "-c", script])
    wait_for_line(process, "ready", timeout_s=10, name="reporter", drain=False)
    assert process.stdout is not None
    assert process.stdout.read().strip() == "result 7"
    assert process.wait(timeout=10) == 0


def test_follow_hands_over_each_line_while_the_process_runs(tmp_path: Path) -> None:
    go_on = tmp_path / "go-on"
    script = "\n".join([
        "import os, sys, time",
        "print('first', flush=True)",
        f"while not os.path.exists({str(go_on)!r}): time.sleep(0.01)",
        "print('on stderr', file=sys.stderr, flush=True)",
        "sys.exit(3)",
    ])
    seen: list[str] = []

    def on_line(line: str) -> None:
        seen.append(line)
        go_on.touch()  # the child goes on only once its first line has been handed over

    code, lines = follow([PY, "-c", script], on_line, timeout_s=30, name="child")
    assert (code, lines, seen) == (3, ["first", "on stderr"], ["first", "on stderr"])


def test_follow_kills_a_silent_process_past_its_timeout() -> None:
    pids: list[int] = []
    script = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    with pytest.raises(TimeoutError, match=r"sleeper did not end within 3 s(.|\n)*\d+"):
        follow([PY, "-c", script], lambda line: pids.append(int(line)), timeout_s=3,
               name="sleeper")
    assert pids and not is_alive(pids[0])


def test_follow_stops_the_process_when_the_caller_gives_up_on_a_line() -> None:
    pids: list[int] = []

    def first_line_only(line: str) -> None:
        pids.append(int(line))
        raise RuntimeError("seen enough")

    script = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    with pytest.raises(RuntimeError, match="seen enough"):
        follow([PY, "-c", script], first_line_only, timeout_s=60, name="talker")
    assert pids and not is_alive(pids[0])


def test_follow_past_its_timeout_also_kills_what_the_process_started() -> None:
    """A process the child started dies with it (one such might hold the output pipe open,
    and the read would then wait for it)."""
    pids: list[int] = []
    script = "\n".join([
        "import subprocess, sys, time",
        "grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],",
        "                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)",
        "print(grandchild.pid, flush=True)",
        "time.sleep(60)",
    ])
    try:
        with pytest.raises(TimeoutError):
            follow([PY, "-c", script], lambda line: pids.append(int(line)), timeout_s=3,
                   name="parent")
        assert pids
        wait_until(lambda: not is_alive(pids[0]), timeout_s=10, what="the grandchild gone")
    finally:
        for pid in pids:
            if is_alive(pid):
                os.kill(pid, signal.SIGKILL)
