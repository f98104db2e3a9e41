"""A head node killed with SIGKILL (its `ray start` gone without a word, as a crashed
process or an OOM kill ends it) leaves no process of that node: the supervisor stops what the
node started by the node's marker once it sees the node end, and the lab's teardown after it
finds nothing of the node left. A real spot lab: its head's dashboard, its agents
(ray::DashboardAgent, ray::RuntimeEnvAgent), GCS and raylet."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import procs
from spotlab import SpotLabConfig, start_lab, stop_lab
from spotlab.state import STATE_DIR_ENV, node_marker
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.ray

AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")
LAB = SpotLabConfig(spot=1, on_demand=0, cpus_per_node=1, alpha=1.0, object_store_mb=80,
                    dashboard=True)


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def still_running(processes: dict[int, int | None]) -> dict[int, str]:
    """Of (pid -> start time), those that still run as the same process."""
    return {pid: command_line(pid) for pid, started in processes.items()
            if procs.is_alive(pid) and procs.start_time(pid) == started}


def of_the_lab(temp_dir: Path) -> dict[int, str]:
    """Every process whose command line names the lab's temp dir (its Ray session's files),
    with or without the marker."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            line = command_line(int(entry.name))
            if str(temp_dir) in line:
                found[int(entry.name)] = line
    return found


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    yield tmp_path


def test_a_head_killed_with_sigkill_leaves_no_process_of_its_node(state_dir: Path) -> None:
    lab = start_lab(LAB, progress=lambda line: None)
    try:
        marker = node_marker(lab.lab_id, "head")
        head = next(node for node in lab.nodes() if node["name"] == "head")
        # the raylet starts its agents after the node registered: wait until both carry
        # their titles, so the kill below is of a head that has all of them
        def agents_up() -> set[int] | None:
            pids = procs.marked_pids(marker)
            titles = {command_line(pid) for pid in pids}
            return pids if all(any(title.startswith(agent) for title in titles)
                               for agent in AGENTS) else None

        node_pids = wait_until(agents_up, 60, "the head's agents up")
        assert head["pid"] in node_pids
        processes = {pid: procs.start_time(pid) for pid in node_pids}
        os.kill(head["pid"], signal.SIGKILL)
        wait_until(lambda: any(e["event"] == "exit" and e["node"] == "head"
                               for e in lab.events()), 60, "the supervisor seeing the head end")
        # the supervisor stops what the node left, by its marker, as soon as it sees it end
        wait_until(lambda: not still_running(processes), 60, "the head's processes ending")
        assert procs.marked_pids(marker) == set()
    finally:
        stop_lab(lab.lab_id, progress=lambda line: None)
    assert not still_running(processes)
    assert procs.marked_pids(lab.lab_id) == set()
    assert of_the_lab(lab.temp_dir) == {}
