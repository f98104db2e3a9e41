"""The spot lab with real Ray nodes: a preemption seen from a task, its timing, the
replacement, the state file (live nodes only), the ports it listens on, two labs side by
side, and teardown on an exception and on Ctrl-C. The start-up (nodes together, a node that
gives up started again, a lab that cannot come up) is in test_start.py."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import procs
from launch.shared_data import lab_folder, put
from procs import marked_pids
from spotlab import SpotLab, SpotLabConfig, spot_lab
from spotlab.lab import lab_status, shared_folder_of
from spotlab.report import format_status
from spotlab.state import STATE_DIR_ENV, node_marker, recorded_lab_ids, state_path
from tests.helpers.processes import ctrl_c_as_from_a_terminal
from tests.helpers.waiting import wait_until
from vocab.shared_data import SHARED_ENV

pytestmark = pytest.mark.ray

WARNING_S = 4.0
REPO = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("spot_driver.py")
SMALL = SpotLabConfig(spot=1, on_demand=0, cpus_per_node=1, alpha=1.0, warning_s=WARNING_S,
                      replace_delay_s=1.0, object_store_mb=80, dashboard=False)
"""One spot node never preempted by its chain (α = 1): the tests interrupt it by hand."""
STAGED = "blobs.npz"
EXAMPLE = REPO / "examples" / "elastic" / "shared_dataset_mlp.py"
LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}
"""127.0.0.1 and ::1 (and 127.0.0.1 mapped into IPv6) as /proc/net/tcp{,6} write them."""
BEYOND_LOOPBACK_ROLES = {"gcs", "node_manager", "object_manager", "dashboard_agent_grpc",
                         "dashboard_agent_http", "runtime_env_agent", "client_server"}
"""The node ports Ray 2.60 binds beyond loopback whatever the lab asks (spotlab.lab)."""
HEAD_METRICS_PORTS = {44227, 44217}  # the dashboard's and the autoscaler's, on the head
AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")  # Ray's per-node daemons' titles


def listening_sockets(pids: set[int] | None = None) -> list[tuple[str, int, int]]:
    """(address as /proc writes it, port, pid) of every listening TCP socket, of `pids`
    only if given (pid 0 when not asked for)."""
    owners: dict[str, int] = {}
    for pid in pids or ():
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                owners[target[len("socket:["):-1]] = pid
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A":  # LISTEN
                continue
            address, port = fields[1].rsplit(":", 1)
            if pids is None or fields[9] in owners:
                found.append((address, int(port, 16), owners.get(fields[9], 0)))
    return found


def listening_ports() -> set[int]:
    return {port for _, port, _ in listening_sockets()}


def snapshot(lab_id: str) -> dict[str, Any]:
    return dict(json.loads(state_path(lab_id).read_text()))


def assert_nothing_left(state: dict[str, Any], names: list[str]) -> None:
    """No process of the lab (by marker and by recorded PID), no port, no temp dir, no
    state file."""
    lab_id = state["lab_id"]
    names = sorted({"supervisor", *names, *(n["name"] for n in state["nodes"])})
    alive = {name: marked_pids(node_marker(lab_id, name)) for name in names}
    assert not any(alive.values()), f"lab processes left: {alive}"
    pids = [n["pid"] for n in state["nodes"] if n["pid"]] + [state.get("supervisor_pid") or 0]
    assert not [pid for pid in pids if pid and procs.is_alive(pid)]
    ports = {port for node in state["nodes"] for port in node["ports"].values()}
    assert not ports & listening_ports(), "a lab port still listens"
    assert not Path(state["temp_dir"]).exists()
    assert not shared_folder_of(lab_id).exists()
    assert lab_id not in recorded_lab_ids()


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("spotlab-state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_DIR_ENV, str(directory))
        yield directory


@pytest.fixture(scope="module")
def lab(state_dir: Path) -> Iterator[SpotLab]:
    with spot_lab(SMALL) as running:
        yield running


@pytest.fixture(scope="module")
def preemption(lab: SpotLab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A file staged in the lab's shared folder (data-put), one preemption of spot-0 while a
    task runs there, and a task after it on the replacement that reads the staged file."""
    out = tmp_path_factory.mktemp("observe") / "observe.jsonl"
    staged = tmp_path_factory.mktemp("staged") / STAGED  # as docs/elastic.md writes it
    subprocess.run([sys.executable, str(EXAMPLE), "--write-dataset", STAGED],
                   cwd=staged.parent, check=True, timeout=120)
    put(lab_folder(lab.lab_id), staged, None, progress=lambda line: None)
    driver = subprocess.Popen(
        [sys.executable, str(DRIVER), str(out), STAGED, str(EXAMPLE)], cwd=REPO,
        env={**os.environ, **lab.driver_env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_until(lambda: out.exists() and out.read_text().count("\n") >= 2, 90,
                   "the observing task")
        lab.interrupt("spot-0")
        stdout, stderr = driver.communicate(timeout=300)  # the replacement, then torch
    finally:
        procs.stop(driver)
    assert driver.returncode == 0, stderr[-2000:]
    wait_until(lambda: [e for e in lab.events() if e["event"] == "join" and e.get("replaces")], 30,
               "the replacement's join event")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    driver_result = next(line for line in reversed(stdout.splitlines()) if line.startswith("{"))
    return {"driver": json.loads(driver_result), "task": rows,
            "events": lab.events(), "nodes": lab.nodes(),
            "staged_sha256": hashlib.sha256(staged.read_bytes()).hexdigest()}


def first(events: list[dict[str, Any]], kind: str, node: str) -> dict[str, Any]:
    return next(e for e in events if e["event"] == kind and e["node"] == node)


def died_at(events: list[dict[str, Any]], node: str) -> float:
    """When the node died: Ray listing it dead, or its `ray start` process exiting, whichever
    the supervisor saw first (on a loaded machine its poll of Ray's node table can miss the
    dead entry before the replacement joins)."""
    return min(e["t"] for e in events if e["event"] in ("dead", "exit") and e["node"] == node)


def test_task_sees_notice_and_drain_before_its_node_dies(preemption: dict[str, Any]) -> None:
    task, events = preemption["task"], preemption["events"]
    assert task[0]["endpoint"] == first(events, "join", "spot-0")["notice_endpoint"]  # its own
    assert task[0]["node"] == first(events, "notice", "spot-0")["ray_node_id"]
    dead = died_at(events, "spot-0")
    seen_notice = next(r for r in task[1:] if r["notice"])
    seen_draining = next(r for r in task[1:] if r["draining"])
    assert seen_notice["t"] < dead and seen_draining["t"] < dead
    assert not any(r["notice"] or r["draining"] for r in task[1:]
                   if r["t"] < first(events, "notice", "spot-0")["t"])
    assert seen_notice["notice_time"] == pytest.approx(
        first(events, "notice", "spot-0")["deadline"], abs=1.0)
    assert preemption["driver"]["observe_error"] in ("NodeDiedError", "WorkerCrashedError")
    assert first(events, "draining", "spot-0")["t"] < dead


def test_the_nodes_agent_drains_it_after_the_notice_before_its_deadline(
        preemption: dict[str, Any]) -> None:
    """The supervisor only serves the notice: the drain Ray lists is the agent's, with the
    deadline the timing budget takes from the notice. (How soon after the notice is
    benchmarks.spotlab_start's measure.)"""
    events = preemption["events"]
    notice = first(events, "notice", "spot-0")
    drain = first(events, "agent-drain", "spot-0")
    assert drain["accepted"] is True and drain["cause"] == "notice"
    assert drain["ray_node_id"] == notice["ray_node_id"]
    assert notice["t"] <= drain["t"] < drain["deadline"]
    assert drain["deadline"] == pytest.approx(notice["deadline"]
                                              - SMALL.budget().deadline_margin_s, abs=0.01)
    assert first(events, "draining", "spot-0")["ray_deadline"] == pytest.approx(
        drain["deadline"], abs=0.01)
    assert not [e for e in events if e["event"] == "exit" and e["node"] == "spot-0"
                and e["t"] < first(events, "kill", "spot-0")["t"] - 0.5]  # no SIGTERM at the notice


def test_the_notice_gives_the_warning_and_the_node_is_killed_at_its_end(
        preemption: dict[str, Any]) -> None:
    """Never before the deadline (how late after it is benchmarks.spotlab_start's measure)."""
    events = preemption["events"]
    notice = first(events, "notice", "spot-0")
    kill = first(events, "kill", "spot-0")
    assert notice["deadline"] - notice["t"] == pytest.approx(WARNING_S)
    assert kill["t"] >= notice["deadline"] - 0.01 and kill["cause"] == "notice"
    assert died_at(events, "spot-0") > notice["t"]


def test_replacement_joins_and_takes_work(preemption: dict[str, Any]) -> None:
    events = preemption["events"]
    join = next(e for e in events if e["event"] == "join" and e["replaces"] == "spot-0")
    assert join["node"] == "spot-1" and join["slot"] == 0
    assert join["t"] >= first(events, "kill", "spot-0")["t"] + SMALL.replace_delay_s
    assert preemption["driver"]["next_spot_node"] == join["ray_node_id"]
    assert join["notice_endpoint"] != first(events, "join", "spot-0")["notice_endpoint"]


def test_a_file_staged_once_is_read_by_a_task_on_the_replacement(
        lab: SpotLab, preemption: dict[str, Any]) -> None:
    """data-put before the preemption; the replacement node (started after it) reads the
    same bytes from SPOTBURST_SHARED, the lab's shared folder, which outlives its nodes, and
    the example script's loader finds its dataset there."""
    driver = preemption["driver"]
    assert driver["shared"] == str(shared_folder_of(lab.lab_id))
    assert driver["staged_sha256"] == preemption["staged_sha256"]
    assert driver["samples"] == 12000
    assert lab.driver_env[SHARED_ENV] == driver["shared"]
    assert (f"shared folder {SHARED_ENV}={driver['shared']} (invoke data-ls --lab {lab.lab_id})"
            in format_status(lab_status(lab.lab_id)))


def test_the_state_file_keeps_live_nodes_only(preemption: dict[str, Any]) -> None:
    """spot-0 is gone (its history is in the events), its replacement is recorded."""
    assert sorted(node["name"] for node in preemption["nodes"]) == ["head", "spot-1"]
    assert all(procs.is_alive(node["pid"]) for node in preemption["nodes"])


def test_the_lab_listens_on_loopback_but_where_ray_allows_no_choice(
        lab: SpotLab, preemption: dict[str, Any]) -> None:
    """Every listening socket of the lab's processes (its supervisor's notice endpoints, its
    nodes' daemons and workers) is on loopback, or one of the ports spotlab.lab documents;
    the nodes' metrics exporters do not listen at all."""
    supervisor = marked_pids(node_marker(lab.lab_id, "supervisor"))
    for address, port, _ in listening_sockets(supervisor):
        assert address in LOOPBACK, f"the supervisor listens on {address}:{port}"
    beyond = []
    for node in lab.nodes():
        assert node["ports"]["metrics_export"] not in listening_ports()
        roles = {port: role for role, port in node["ports"].items()}
        for address, port, pid in listening_sockets(marked_pids(node_marker(lab.lab_id,
                                                                            node["name"]))):
            if address in LOOPBACK:
                continue
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
            worker = command.startswith("ray::") and not command.startswith(AGENTS)
            if roles.get(port) in BEYOND_LOOPBACK_ROLES or worker or (
                    node["name"] == "head" and port in HEAD_METRICS_PORTS):
                beyond.append((node["name"], roles.get(port) or command))
                continue
            raise AssertionError(f"node {node['name']}: {command} listens on {address}:{port}")
    assert ("head", "gcs") in beyond  # Ray still binds it beyond loopback: the docs say so


def test_two_labs_do_not_collide_and_an_exception_removes_one(lab: SpotLab) -> None:
    """The second lab keeps its shared folder (--keep-data): all else of it goes."""
    first_lab_pids = {n["name"]: n["pid"] for n in lab.nodes()}
    with pytest.raises(RuntimeError, match="boom"):
        with spot_lab(replace(SMALL, keep_data=True)) as other:
            state = snapshot(other.lab_id)
            kept = shared_folder_of(other.lab_id)
            (kept / "results.txt").write_text("kept")
            assert other.driver_env[SHARED_ENV] == str(kept) != lab.driver_env[SHARED_ENV]
            # the first lab's live nodes: spot-0, preempted earlier, released its ports
            ours = [n for n in lab.nodes() if n["pid"] and procs.is_alive(n["pid"])]
            theirs = other.nodes()
            assert not ({p for n in ours for p in n["ports"].values()}
                        & {p for n in theirs for p in n["ports"].values()})
            assert other.temp_dir != lab.temp_dir and other.ray_address != lab.ray_address
            assert (other.temp_dir / "ray_auth_token").read_text() != (
                lab.temp_dir / "ray_auth_token").read_text()
            raise RuntimeError("boom")
    assert (kept / "results.txt").read_text() == "kept"
    shutil.rmtree(kept)
    assert_nothing_left(state, [])
    assert {n["name"]: n["pid"] for n in lab.nodes()} == first_lab_pids
    assert procs.is_alive(first_lab_pids["head"])  # the first lab is untouched


CHILD = """
import sys
from spotlab import SpotLabConfig, spot_lab
with spot_lab(SpotLabConfig(spot=1, on_demand=1, alpha=1.0, dashboard=False)):
    pass
"""


def test_ctrl_c_during_start_up_leaves_nothing(state_dir: Path) -> None:
    before = set(recorded_lab_ids())
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             preexec_fn=ctrl_c_as_from_a_terminal)
    try:
        lab_id = wait_until(lambda: (set(recorded_lab_ids()) - before) or None, 60,
                            "the lab's state file").pop()
        state = wait_until(lambda: (s := snapshot(lab_id))["nodes"] and s["nodes"][0]["pid"]
                           and s, 60, "the head node's start")
        assert not state["up"]
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=90)
    finally:
        procs.stop(child)
    assert child.returncode != 0 and "KeyboardInterrupt" in stderr
    assert_nothing_left(state, ["head", "od-0", "spot-0"])
