"""Ctrl-C or SIGTERM during a run task stops everything the task started (its local Ray's
daemons and agents included), prints one line saying what was removed, and exits 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.helpers.doll import TINY_DOLL_ARGS
from tests.helpers.processes import ctrl_c_as_from_a_terminal

PROJECT_DIR = Path(__file__).resolve().parents[2]
TAG = "SPOTBURST_TEST_TAG"


def tagged_processes(tag: str) -> list[int]:
    """Live processes carrying `TAG=tag` in their environment (everything the task started
    inherits it, Ray's daemons and workers too)."""
    needle = f"{TAG}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.ray
@pytest.mark.subprocess
@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_run_doll_leaves_nothing_running(tmp_path: Path, sent: int) -> None:
    tag = uuid.uuid4().hex
    # a run long enough to be interrupted while its workers stream
    args = list(TINY_DOLL_ARGS)
    args[args.index("--batches") + 1] = "4000"
    argv = [sys.executable, "-m", "invoke", "run-doll", *args, "--out", str(tmp_path / "out")]
    task = subprocess.Popen(argv, cwd=PROJECT_DIR, env={**os.environ, TAG: tag},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=ctrl_c_as_from_a_terminal)
    try:
        assert task.stdout is not None
        for line in task.stdout:  # the experiment's first progress line: Ray and workers run
            if " batches (" in line:
                break
        else:
            assert task.stderr is not None
            pytest.fail(f"run-doll ended before it ran ({task.wait()}): {task.stderr.read()}")
        assert len(tagged_processes(tag)) > 3  # invoke, the driver, Ray's daemons, workers
        task.send_signal(sent)
        _, err = task.communicate(timeout=120)
    finally:
        if task.poll() is None:
            task.kill()
    assert task.returncode == 130, err
    assert err.count("\n") == 1 and err.startswith("interrupted: removed the local run of "
                                                   "workloads.doll"), err
    assert tagged_processes(tag) == []


@pytest.mark.ray
@pytest.mark.subprocess
def test_a_local_run_that_prints_no_progress_is_stopped_by_the_watchdog(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    # a second is less than the driver takes to start its Ray and print its first line
    argv = [sys.executable, "-m", "invoke", "run-doll", *TINY_DOLL_ARGS, "--stall-timeout", "1",
            "--out", str(tmp_path / "out")]
    done = subprocess.run(argv, cwd=PROJECT_DIR, env={**os.environ, TAG: tag},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert done.stderr == ("error: the run printed no progress for 1 s (--stall-timeout); "
                           "it was stopped\n")
    assert tagged_processes(tag) == []
