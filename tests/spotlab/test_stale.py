"""Stale spot-lab records (their supervisor died): shown as stale, removable, and never a
licence to stop a process whose PID they name. No Ray: the records are written here, the
processes they name are sleeps started here (one foreign, some carrying the lab's marker)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import procs
from procs.journal import take_removed
from spotlab import SpotLabConfig, SpotLabNotFound, lab_status, stop_lab
from spotlab.report import format_status
from spotlab.state import (
    STALE,
    STARTING,
    STATE_DIR_ENV,
    UP,
    condition,
    load_state,
    node_marker,
    recorded_lab_ids,
    save_state,
    starter_identity,
    state_path,
)

pytestmark = pytest.mark.subprocess

REPO = Path(__file__).resolve().parents[2]
SLEEP = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"]


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Records in a private folder, and the labs' temp dirs (tempfile's, which a record
    must name to be followed) in this test's own."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "spotlabs"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path / "spotlabs"


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts; stopped by their handles afterwards, whatever happened."""
    processes: list[subprocess.Popen[str]] = []
    yield processes
    procs.stop_children(processes, grace_s=5)


def sleep(started: list[subprocess.Popen[str]], marker: str | None = None) -> int:
    """A sleeping process: foreign (no marker at all) or carrying `marker`."""
    env = {key: value for key, value in os.environ.items() if key != procs.MARKER_ENV}
    if marker is not None:
        env[procs.MARKER_ENV] = marker
    process = subprocess.Popen(SLEEP, env=env, stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    started.append(process)
    procs.wait_for_line(process, "up", timeout_s=30, name="sleep")
    return process.pid


def record(lab_id: str, temp_dir: Path, supervisor_pid: int | None,
           nodes: dict[str, int]) -> dict[str, Any]:
    """A lab's state file as its supervisor writes it, naming these PIDs."""
    temp_dir.mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = {
        "lab_id": lab_id, "config": SpotLabConfig(spot=1, on_demand=0).to_dict(),
        "temp_dir": str(temp_dir), "supervisor_pid": supervisor_pid, "up": True,
        "starter": {"pid": None, "start_time": None},
        "nodes": [{"name": name, "pool": "spot", "slot": 0, "num_cpus": 1, "pid": pid,
                   "ports": {}, "notice_endpoint": "http://127.0.0.1:9", "replaces": None}
                  for name, pid in nodes.items()]}
    save_state(state)
    return state


def invoke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)


def test_down_never_stops_a_recorded_pid_without_the_marker(
        state_dir: Path, tmp_path: Path, started: list[subprocess.Popen[str]]) -> None:
    foreign_supervisor, foreign_node = sleep(started), sleep(started)
    leftover = sleep(started, node_marker("aaa111", "spot-0"))  # really the lab's
    record("aaa111", tmp_path / "sbs-aaa111", foreign_supervisor,
           {"head": foreign_node, "spot-0": leftover})
    assert condition(load_state("aaa111")) == STALE
    progress: list[str] = []
    removed = stop_lab("aaa111", progress=progress.append)
    assert procs.is_alive(foreign_supervisor) and procs.is_alive(foreign_node)
    assert not procs.is_alive(leftover)
    assert removed == [f"pid {leftover} (node spot-0)", f"directory {tmp_path / 'sbs-aaa111'}"]
    assert any(f"supervisor pid {foreign_supervisor} is no longer the lab's" in line
               for line in progress)
    assert any(f"node head: recorded pid {foreign_node} is no longer the lab's" in line
               for line in progress)
    assert recorded_lab_ids() == [] and not (tmp_path / "sbs-aaa111").exists()
    assert "spot lab aaa111 (2 nodes)" in take_removed()  # an interrupted task says so


def test_spot_lab_down_through_invoke_leaves_foreign_processes_alone(
        state_dir: Path, tmp_path: Path, started: list[subprocess.Popen[str]]) -> None:
    foreign_supervisor, foreign_node = sleep(started), sleep(started)
    record("bbb222", tmp_path / "sbs-bbb222", foreign_supervisor, {"spot-0": foreign_node})
    done = invoke("spot-lab-down", "--lab", "bbb222")
    assert done.returncode == 0, done.stderr[-800:]
    assert procs.is_alive(foreign_supervisor) and procs.is_alive(foreign_node)
    assert not state_path("bbb222").exists()


def test_status_shows_a_stale_lab_beside_a_live_one(
        state_dir: Path, tmp_path: Path, started: list[subprocess.Popen[str]]) -> None:
    live_supervisor = sleep(started, node_marker("ccc333", "supervisor"))
    record("ccc333", tmp_path / "sbs-ccc333", live_supervisor, {})
    record("ddd444", tmp_path / "sbs-ddd444", sleep(started), {})  # its PID is someone else's
    status = lab_status()  # the only lab that is not stale
    assert (status["lab_id"], status["condition"]) == ("ccc333", UP)
    assert status["other_labs"] == [{"lab_id": "ddd444", "condition": STALE}]
    assert "other spot labs recorded: ddd444 (stale: supervisor gone)" in format_status(status)
    stale = lab_status("ddd444")
    assert stale["condition"] == STALE and not stale["supervisor_alive"]
    assert format_status(stale).startswith("spot lab ddd444: STALE (supervisor gone)")
    shown = invoke("spot-lab-status")
    assert shown.returncode == 0, shown.stderr[-800:]
    assert shown.stdout.startswith("spot lab ccc333: up, supervisor running")
    assert "ddd444 (stale: supervisor gone)" in shown.stdout


def test_down_without_lab_refuses_several_in_one_line_and_removes_a_lone_stale_one(
        state_dir: Path, tmp_path: Path, started: list[subprocess.Popen[str]]) -> None:
    record("eee555", tmp_path / "sbs-eee555", sleep(started, node_marker("eee555",
                                                                         "supervisor")), {})
    record("fff666", tmp_path / "sbs-fff666", None, {})  # its starter died before its supervisor
    with pytest.raises(SpotLabNotFound) as several:
        stop_lab()
    assert str(several.value) == (
        f"--lab: 2 spot labs recorded in {state_dir}: eee555 (up), fff666 (stale: supervisor "
        f"gone); give one with --lab ID")
    refused = invoke("spot-lab-down")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "eee555 (up), fff666 (stale: supervisor gone)" in refused.stderr
    assert invoke("spot-lab-down", "--lab", "eee555").returncode == 0
    down = invoke("spot-lab-down")  # the stale one is the only lab left
    assert down.returncode == 0, down.stderr[-800:]
    assert recorded_lab_ids() == []


def test_a_lab_whose_starter_lives_is_starting_not_stale(state_dir: Path,
                                                         tmp_path: Path) -> None:
    state = record("ggg777", tmp_path / "sbs-ggg777", None, {})
    state["starter"] = starter_identity()
    save_state(state)
    assert condition(load_state("ggg777")) == STARTING
    state["starter"]["start_time"] -= 1  # the same PID, another process: not its starter
    save_state(state)
    assert condition(json.loads(state_path("ggg777").read_text())) == STALE
