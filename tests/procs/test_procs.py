"""The process helper against real child processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from procs import (
    MARKER_ENV,
    ProcessNotReady,
    follow,
    is_alive,
    log_gist,
    marked_pids,
    marker_of,
    running,
    spawn,
    start_time,
    stop,
    stop_children,
    stop_marked,
    wait_for_line,
)
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


SLEEPER = [PY, "-c", "import time; print('up', flush=True); time.sleep(600)"]


def sleeper(marker: str | None = None) -> subprocess.Popen[str]:
    """A process that sleeps, with MARKER_ENV=`marker` in its environment if given."""
    env = {MARKER_ENV: marker} if marker is not None else None
    if marker is None:
        env = {key: value for key, value in os.environ.items() if key != MARKER_ENV}
        process = subprocess.Popen(SLEEPER, env=env, stdout=subprocess.PIPE, text=True)
    else:
        process = spawn(SLEEPER, env=env)
    wait_for_line(process, "up", timeout_s=30, name="sleeper")
    return process


def test_stop_marked_stops_only_what_carries_the_owners_marker() -> None:
    ours = sleeper("lab1/spot-0")
    whole_lab = sleeper("lab1")
    other_lab = sleeper("lab10/spot-0")  # shares a prefix, not the owner
    foreign = sleeper()
    try:
        pids = {p.pid for p in (ours, whole_lab, other_lab, foreign)}
        assert marked_pids("lab1") == {ours.pid, whole_lab.pid}
        stopped = stop_marked(pids, "lab1", grace_s=5)
        assert stopped.stopped == {ours.pid, whole_lab.pid} and not stopped.left
        assert stopped.not_ours == {other_lab.pid, foreign.pid}
        assert ours.wait(timeout=10) == -signal.SIGTERM
        assert is_alive(other_lab.pid) and is_alive(foreign.pid)
    finally:
        for process in (ours, whole_lab, other_lab, foreign):
            stop(process)


def test_a_marked_process_that_ignores_sigterm_is_killed() -> None:
    script = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
              "print('up', flush=True); time.sleep(600)")
    stubborn = spawn([PY, "-c", script], env={MARKER_ENV: "lab2/head"})
    try:
        wait_for_line(stubborn, "up", timeout_s=30, name="stubborn")
        stopped = stop_marked([stubborn.pid], "lab2", grace_s=0.3)
        assert stopped.stopped == {stubborn.pid}
        assert stubborn.wait(timeout=10) == -signal.SIGKILL
    finally:
        stop(stubborn)


def test_gone_pids_are_in_no_set() -> None:
    done = spawn([PY, "-c", "pass"], env={MARKER_ENV: "lab3"})
    done.wait(timeout=30)
    stopped = stop_marked([done.pid], "lab3")
    assert not (stopped.stopped or stopped.left or stopped.not_ours)


def test_a_marked_process_never_finds_itself_among_its_labs_processes() -> None:
    sibling = sleeper("lab5/spot-0")
    script = ("import os, procs; found = procs.marked_pids('lab5'); "
              "print(os.getpid() in found, len(found), flush=True)")
    try:
        code, lines = follow([PY, "-c", script], lambda line: None, timeout_s=60, name="me",
                             env={MARKER_ENV: "lab5/head"})
        assert (code, lines) == (0, ["False 1"])  # its sibling, not itself
    finally:
        stop(sibling)


def test_stop_children_stops_every_handle_together() -> None:
    children = [sleeper("lab4") for _ in range(3)]
    stop_children(children, grace_s=5)
    assert [child.returncode for child in children] == [-signal.SIGTERM] * 3


def test_start_time_names_one_process() -> None:
    child = sleeper()
    try:
        first = start_time(child.pid)
        assert first is not None and first == start_time(child.pid)
    finally:
        stop(child)
    assert start_time(child.pid) is None


@pytest.mark.parametrize("log, gist", [
    ("2026 INFO starting\nTraceback (most recent call last):\n  File \"x.py\", line 3\n"
     "    raise Exception(...)\nException: The current node timed out during startup.\n"
     "done\n", "Exception: The current node timed out during startup."),
    ("[2026 E 1 1] (raylet) main.cc:9: Check failed: port > 0 no port\n", "Check failed"),
    ("just\nthe last line\n", "the last line"),
    ("", ""),
])
def test_log_gist_is_the_line_that_says_what_went_wrong(tmp_path: Path, log: str,
                                                          gist: str) -> None:
    path = tmp_path / "node.log"
    path.write_text(log)
    assert gist in log_gist(path)
    assert len(log_gist(path)) <= 160
    assert log_gist(tmp_path / "missing.log") == ""


@pytest.mark.subprocess
def test_follow_kills_a_process_its_caller_calls_stalled_and_returns_its_end() -> None:
    seen: list[str] = []
    script = "import time; print('one', flush=True); time.sleep(600)"
    code, lines = follow([PY, "-c", script], seen.append, timeout_s=600,
                         name="stalling", stalled=lambda: seen == ["one"])
    assert lines == ["one"] and code == -signal.SIGKILL  # killed, not timed out


def test_a_marked_process_that_renames_itself_keeps_its_marker_readable() -> None:
    """Ray's agents and workers set their titles with setproctitle, which by default writes
    over the memory /proc/PID/environ shows: a process started by spawn keeps its marker."""
    pytest.importorskip("setproctitle")
    renames = [PY, "-c", "import setproctitle, time; setproctitle.setproctitle('ray::' + "
               "'x' * 8192); print('up', flush=True); time.sleep(600)"]
    plain_env = {key: value for key, value in os.environ.items()
                 if key not in (MARKER_ENV, "SPT_NOENV")}
    unprotected = subprocess.Popen(renames, env={**plain_env, MARKER_ENV: "lab6"},
                                   stdout=subprocess.PIPE, text=True)
    ours = spawn(renames, env={MARKER_ENV: "lab7"})
    try:
        for process in (unprotected, ours):
            wait_for_line(process, "up", timeout_s=30, name="renamer")
        assert marker_of(unprotected.pid) is None  # what setproctitle does without SPT_NOENV
        assert marker_of(ours.pid) == "lab7"
        assert marked_pids("lab7") == {ours.pid}
    finally:
        for process in (unprotected, ours):
            stop(process)
