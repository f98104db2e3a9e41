"""A spot lab's start-up with real Ray nodes: the workers start together once the head is
up, one whose `ray start` gives up is started again, and a lab that cannot come up ends with
one line saying why, its logs kept, nothing of it left."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

import procs
from spotlab import SpotLab, SpotLabConfig, start_lab, stop_lab
from spotlab.state import STATE_DIR_ENV, node_marker, recorded_lab_ids, state_path
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]
LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F"}


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "spotlabs"))
    return tmp_path / "spotlabs"


def recorded_pid(lab_id: str, name: str) -> int | None:
    try:
        state = json.loads(state_path(lab_id).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return next((node["pid"] for node in state["nodes"] if node["name"] == name), None)


def listening_on(port: int) -> set[str]:
    return {line.split()[1].rsplit(":", 1)[0]
            for table in ("/proc/net/tcp", "/proc/net/tcp6")
            for line in Path(table).read_text().splitlines()[1:]
            if line.split()[3] == "0A" and int(line.split()[1].rsplit(":", 1)[1], 16) == port}


def test_workers_start_together_and_one_that_gives_up_is_started_again(
        state_dir: Path) -> None:
    """spot-0's first `ray start` is killed before it joins: the supervisor starts it again
    and the lab comes up; both workers had started before either joined."""
    outcome: dict[str, Any] = {}

    def bring_up() -> None:
        try:
            outcome["lab"] = start_lab(SpotLabConfig(spot=2, on_demand=0, alpha=1.0,
                                                     object_store_mb=80, dashboard=True),
                                       progress=lambda message: None)
        except BaseException as error:  # re-raised in the test's thread
            outcome["error"] = error

    starting = threading.Thread(target=bring_up)
    starting.start()
    lab_id = wait_until(lambda: recorded_lab_ids(), 60, "the lab's state file")[0]
    first_try = wait_until(lambda: recorded_pid(lab_id, "spot-0"), 180, "spot-0's start")
    killed = procs.stop_marked([first_try], node_marker(lab_id, "spot-0"), grace_s=0)
    assert killed.stopped == {first_try}
    starting.join(timeout=600)
    if "error" in outcome:
        raise outcome["error"]
    lab: SpotLab = outcome["lab"]
    try:
        events = lab.events()
        worker_starts = [e for e in events if e["event"] == "start" and e["node"] != "head"]
        worker_joins = [e["t"] for e in events if e["event"] == "join" and e["node"] != "head"]
        assert max(e["t"] for e in worker_starts if e["attempt"] == 1) < min(worker_joins)
        retry = next(e for e in events if e["event"] == "start-retry")
        assert retry["node"] == "spot-0" and retry["why"] in ("exited -15", "exited -9")
        joins = {e["node"]: e for e in events if e["event"] == "join"}
        assert (joins["spot-0"]["attempts"], joins["spot-1"]["attempts"]) == (2, 1)
        assert joins["spot-0"]["pid"] != first_try
        assert lab.dashboard_url is not None
        assert listening_on(int(lab.dashboard_url.rsplit(":", 1)[1])) <= LOOPBACK
    finally:
        stop_lab(lab.lab_id, progress=lambda message: None)
    assert not procs.marked_pids(lab.lab_id) and recorded_lab_ids() == []


@pytest.mark.subprocess
def test_a_lab_that_cannot_come_up_says_why_in_one_line_and_leaves_nothing(
        state_dir: Path) -> None:
    """A temp dir too long for Ray's sockets (AF_UNIX paths end at 107 bytes): the head's
    `ray start` fails each time it is started. Its shared folder goes too, --keep-data or
    not."""
    long_tmp = Path(tempfile.mkdtemp(prefix="t" * 90))
    done = subprocess.run(
        [sys.executable, "-m", "invoke", "spot-lab-up", "--spot", "1", "--on-demand", "0",
         "--keep-data"],
        cwd=REPO, env={**os.environ, "TMPDIR": str(long_tmp)}, capture_output=True, text=True,
        timeout=600, check=False)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: spot lab ")
    assert "did not come up: node head exited 1 (attempt 3 of 3): " in last
    assert "AF_UNIX path length cannot exceed 107 bytes" in last
    assert len(last) < 600
    kept = Path(last.rsplit("its logs are kept in ", 1)[1])
    assert (kept / "supervisor.log").exists() and "AF_UNIX" in (kept / "head.log").read_text()
    lab_id = last.removeprefix("error: spot lab ").split()[0]
    assert not procs.marked_pids(lab_id)
    assert recorded_lab_ids() == [] and not (long_tmp / f"sbs-{lab_id}").exists()
    # nothing can have been staged in a lab that never came up: --keep-data keeps nothing
    assert not (long_tmp / f"sbs-{lab_id}-shared").exists()
    shutil.rmtree(long_tmp)
