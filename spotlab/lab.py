"""The local spot lab: bring one up, look at it, preempt a node by hand, remove it.

`spot_lab(config)` is the context manager; `start_lab` / `stop_lab` are the halves that
`invoke spot-lab-up` and `spot-lab-down` call from separate processes (through the state
file). A lab is one supervisor process (spotlab.supervisor) that owns the lab's Ray nodes and
drives their preemptions; starting a lab spawns it and waits for its ready line, stopping
a lab sends it SIGTERM, then removes anything it left that carries the lab's marker
(`procs.stop_marked`): never a process only because its PID was recorded.

Ports. The lab binds to 127.0.0.1 whatever Ray 2.60 lets it: the dashboard and Jobs API
(`--dashboard-host`) and every notice endpoint; the nodes' Prometheus exporters are off
(RAY_enable_metrics_collection=0). Ray 2.60 gives no way to bind the rest to loopback. On a
host with a routable interface `ray start` replaces `--node-ip-address=127.0.0.1` by the
host's outward address (ray/scripts/scripts.py:855, `services.resolve_ip_for_localhost`,
ray/_private/services.py:799-801: "Make sure localhost isn't resolved to the loopback ip"),
and each server keeps to loopback only when the node's address is loopback, so these listen
beyond it (each node's ports are recorded by role in the state file):
- the GCS, the raylet's node manager and object manager, every Ray worker process: all
  interfaces (C++ gRPC, src/ray/rpc/grpc_server.cc `GrpcServer::Run`:
  `listen_to_localhost_only_ ? "127.0.0.1:" : "0.0.0.0:"`);
- the dashboard agent: its gRPC port on all interfaces (ray/dashboard/agent.py:164-166,
  `get_all_interfaces_ip()`), its HTTP port on the node's address and 127.0.0.1
  (ray/dashboard/http_server_agent.py:54-66);
- the runtime-env agent: the node's address (ray/_private/runtime_env/agent/main.py:244-248);
- the Ray Client server on the head: the node's address and 127.0.0.1
  (ray/util/client/server/server.py:799-801); a head always starts it (a port below 1024,
  e.g. 0, is refused: ray/_private/parameter.py:405-412);
- on the head, the dashboard's and the autoscaler's Prometheus servers, on all interfaces and
  fixed ports 44227 and 44217 (ray/dashboard/head.py:361, ray/autoscaler/_private/
  monitor.py:204-209), without a token; they serve metrics only.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import procs
from procs import MARKER_ENV
from procs.journal import note_removed
from spotlab.config import SpotLabConfig
from spotlab.state import (
    CorruptRecord,
    condition,
    lab_temp_dir,
    load_state,
    node_marker,
    other_labs,
    save_state,
    starter_identity,
    state_path,
)
from spotlab.supervisor import FAILED_LINE, READY_LINE, lab_env
from vocab.errors import RunFailed, UserError
from vocab.names import NotOurs, owned
from workloads.common.input_files import InputFileError, parse_json

START_TIMEOUT_S = 600.0
Progress = Callable[[str], None]


class SpotLabTeardownError(RunFailed, RuntimeError):
    """Something the lab created is still there; its state file is kept for a retry."""


class SpotLabStartFailed(procs.ProcessNotReady):
    """The lab did not come up: one line naming the node, the gist of its log and where the
    lab's logs are kept; everything the lab started is removed by then."""


def print_progress(message: str) -> None:
    print(f"[spot lab {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class SpotLab:
    """A running lab, as its users need it."""

    lab_id: str
    ray_address: str
    dashboard_url: str | None
    driver_env: dict[str, str]
    """Environment of a driver of this lab: RAY_ADDRESS and the lab's token (by path)."""
    events_path: Path
    temp_dir: Path

    def nodes(self) -> list[dict[str, Any]]:
        return list(load_state(self.lab_id).get("nodes", []))

    def events(self) -> list[dict[str, Any]]:
        return read_events(self.events_path)

    def token(self) -> str:
        """The lab's Ray token, for a Jobs client's Authorization header."""
        return Path(self.driver_env["RAY_AUTH_TOKEN_PATH"]).read_text().strip()

    def interrupt(self, node: str) -> None:
        """Preempt `node` now (a notice, a drain, a kill at the deadline, a replacement)."""
        interrupt(self.lab_id, node)


def start_lab(config: SpotLabConfig, progress: Progress = print_progress) -> SpotLab:
    """Bring a lab up and leave it running. If it does not come up, SpotLabStartFailed says
    why in one line (which node, the gist of its log, where the lab's logs were kept) once
    everything it started is removed; on Ctrl-C it is removed too."""
    lab_id = secrets.token_hex(3)
    temp_dir = lab_temp_dir(lab_id)
    shared_dir = shared_folder_of(lab_id)
    state: dict[str, Any] = {"lab_id": lab_id, "config": config.to_dict(),
                             "temp_dir": str(temp_dir), "shared_dir": str(shared_dir),
                             "supervisor_pid": None, "up": False,
                             "starter": starter_identity(), "nodes": []}
    supervisor: subprocess.Popen[str] | None = None
    progress(f"starting spot lab {lab_id}: head + {config.on_demand} on-demand + "
             f"{config.learner} learner + {config.spot} spot nodes")
    try:
        with procs.sigterm_raises_interrupt():
            save_state(state)  # the temp dir is recorded before it exists
            try:
                temp_dir.mkdir(mode=0o700)
            except FileExistsError:
                state["temp_dir"] = None  # not ours: never removed
                save_state(state)
                raise
            (temp_dir / "logs").mkdir()
            (temp_dir / "interrupts").mkdir()
            try:
                shared_dir.mkdir(mode=0o700)
            except FileExistsError:
                state["shared_dir"] = None  # not ours: never used nor removed
                save_state(state)
                raise
            token = temp_dir / "ray_auth_token"
            token.touch(mode=0o600)
            token.write_text(secrets.token_hex(32))
            log = temp_dir / "logs" / "supervisor.log"
            # From here on the supervisor alone writes the state file.
            supervisor = procs.spawn(
                [sys.executable, "-m", "spotlab", lab_id],
                env={**lab_env(temp_dir), MARKER_ENV: node_marker(lab_id, "supervisor")},
                log_path=log,
            )
            _wait_until_up(supervisor, log)
        lab = running_lab(lab_id)
        progress(f"spot lab {lab_id} is up: Ray at {lab.ray_address}")
        return lab
    except BaseException as error:
        kept = keep_logs(temp_dir, lab_id) if isinstance(error, _NotUp) else None
        progress(f"spot lab {lab_id} did not come up: removing what it created")
        # its shared folder too: nothing can have been staged in a lab that never came up
        stop_lab(lab_id, progress=progress, supervisor=supervisor, keep_data=False)
        if isinstance(error, _NotUp):
            where = f"its logs are kept in {kept}" if kept else "it left no logs"
            raise SpotLabStartFailed(f"spot lab {lab_id} did not come up: {error}; "
                                     f"{where}") from None
        raise


class _NotUp(Exception):
    """Why the supervisor did not report the lab up, in a few words."""


def _wait_until_up(supervisor: subprocess.Popen[str], log: Path) -> None:
    """Until the supervisor's log says the lab is up; _NotUp with its reason if it says the
    lab failed, ends without saying, or says nothing within START_TIMEOUT_S."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
            if line.startswith(READY_LINE):
                return
            if line.startswith(FAILED_LINE):
                raise _NotUp(line.removeprefix(FAILED_LINE).strip())
        if supervisor.poll() is not None:
            raise _NotUp(f"its supervisor exited {supervisor.returncode}: "
                         f"{procs.log_gist(log)}")
        if time.monotonic() > deadline:
            raise _NotUp(f"not up within {START_TIMEOUT_S:g} s: {procs.log_gist(log)}")
        time.sleep(procs.POLL_S)


def shared_folder_of(lab_id: str) -> Path:
    """The lab's shared folder: SPOTBURST_SHARED on every node, beside (not in) its temp dir
    so that `--keep-data` can keep it."""
    return Path(f"{lab_temp_dir(lab_id)}-shared")


def keep_logs(temp_dir: Path, lab_id: str) -> Path | None:
    """Copy the lab's logs (each node's `ray start` output and its Ray session logs) to a
    folder that outlives the lab's teardown; returns it (None when there was nothing)."""
    if not (temp_dir / "logs").is_dir():
        return None
    kept = Path(tempfile.gettempdir()) / f"sbs-{lab_id}-logs"
    shutil.copytree(temp_dir / "logs", kept, dirs_exist_ok=True)
    for session in temp_dir.glob("*/session_latest/logs"):
        node = session.parents[1].name
        try:
            shutil.copytree(session, kept / f"{node}-ray", dirs_exist_ok=True)
        except (shutil.Error, OSError):
            pass  # a log that vanished mid-copy: the rest is still worth keeping
    return kept


@contextmanager
def spot_lab(config: SpotLabConfig, progress: Progress = print_progress) -> Iterator[SpotLab]:
    """A running lab for the `with` block; removed on exit, exception, Ctrl-C or SIGTERM."""
    lab = start_lab(config, progress)
    try:
        with procs.sigterm_raises_interrupt():
            yield lab
    finally:
        stop_lab(lab.lab_id, progress=progress)


def running_lab(lab_id: str | None = None) -> SpotLab:
    state = load_state(lab_id, prefer_live=True)
    description = state.get("description")
    if not state.get("up") or description is None:
        raise RuntimeError(f"spot lab {state['lab_id']} is not up (starting, or it failed)")
    return SpotLab(
        lab_id=state["lab_id"],
        ray_address=description["ray_address"],
        dashboard_url=description["dashboard_url"],
        driver_env=dict(description["driver_env"]),
        events_path=Path(description["events"]),
        temp_dir=Path(state["temp_dir"]),
    )


def stop_lab(lab_id: str | None = None, progress: Progress = print_progress,
             supervisor: subprocess.Popen[str] | None = None,
             save_events: Path | None = None, keep_data: bool | None = None) -> list[str]:
    """Remove a lab: its supervisor (which stops its nodes), anything left of them, its temp
    dir, its shared folder (unless `keep_data`, or, when that is None, the lab's own
    `--keep-data`) and its state file. Returns what was removed. A process is stopped only
    through the `supervisor` handle or when it carries the lab's marker: a recorded PID
    without it (a stale record: the supervisor died, the PID names another process by now)
    is reported and left alone. Ctrl-C is ignored meanwhile, so a second Ctrl-C cannot leave
    half a lab."""
    with procs.interrupts_ignored():
        try:
            state = load_state(lab_id)
        except CorruptRecord as error:
            if lab_id is None:
                raise
            return _remove_by_markers(lab_id, str(error), progress)
        lab_id = state["lab_id"]
        nodes = len(state.get("nodes", []))
        config = SpotLabConfig.from_dict(state["config"])
        temp_dir = _own_temp_dir(state, progress)
        shared_dir = _own_dir(state, "shared_dir", shared_folder_of(lab_id), progress)
        if save_events is not None and temp_dir and (temp_dir / "events.jsonl").exists():
            _save_events(temp_dir / "events.jsonl", save_events)
        removed = _stop_supervisor(state, supervisor, config, progress)
        state = load_state(lab_id)  # the supervisor may have added nodes meanwhile
        recorded = {int(node["pid"]): node["name"] for node in state.get("nodes", [])
                    if node.get("pid") is not None}
        left = procs.stop_all_marked(lab_id, set(recorded), grace_s=5.0)
        for pid in sorted(left.not_ours):
            progress(f"node {recorded.get(pid)}: recorded pid {pid} is no longer the lab's "
                     f"(no marker): left alone")
        if left.stopped:
            progress(f"stopped {len(left.stopped)} processes the supervisor left")
        removed += [f"pid {pid}" + (f" (node {recorded[pid]})" if pid in recorded else "")
                    for pid in sorted(left.stopped)]
        if temp_dir is not None and temp_dir.exists():
            shutil.rmtree(temp_dir, ignore_errors=True)
            removed.append(f"directory {temp_dir}")
        keep = config.keep_data if keep_data is None else keep_data
        if shared_dir is not None and shared_dir.exists():
            if keep:
                progress(f"kept the lab's shared folder {shared_dir}")
                shared_dir = None
            else:
                shutil.rmtree(shared_dir, ignore_errors=True)
                removed.append(f"shared folder {shared_dir}")
        leftovers = [f"pid {pid}" for pid in sorted(procs.marked_pids(lab_id))]
        for directory in (temp_dir, shared_dir):
            if directory is not None and directory.exists():
                leftovers.append(f"directory {directory}")
        if leftovers:
            raise SpotLabTeardownError(f"spot lab {lab_id}: still present after teardown: "
                                       f"{'; '.join(leftovers)} (state kept in "
                                       f"{state_path(lab_id)})")
        state_path(lab_id).unlink(missing_ok=True)
        note_removed(f"spot lab {lab_id} ({nodes} nodes)")
    progress(f"spot lab {lab_id} removed")
    return removed


def _own_temp_dir(state: dict[str, Any], progress: Progress) -> Path | None:
    """The recorded temp dir when it is the one this lab made (`lab_temp_dir`)."""
    return _own_dir(state, "temp_dir", lab_temp_dir(state["lab_id"]), progress)


def _own_dir(state: dict[str, Any], key: str, expected: Path,
             progress: Progress) -> Path | None:
    """The folder the record names under `key` when it is `expected`, the one this lab made;
    a record naming any other path is reported and that path left alone."""
    if not state.get(key):
        return None
    try:
        return owned(state[key], expected)
    except NotOurs as error:
        progress(f"spot lab {state['lab_id']}: recorded {key} {error}")
        return None


def _save_events(events: Path, target: Path) -> None:
    """Copy the events before anything is removed; a target that cannot be written stops
    the teardown with one line, the lab untouched."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(events, target)
    except OSError as error:
        raise UserError(f"--save-events: {target}: {error.strerror or error}; the lab was "
                        f"left as it is") from None


def _remove_by_markers(lab_id: str, problem: str, progress: Progress) -> list[str]:
    """What is left of a lab whose record is corrupt: its processes by their marker (the
    supervisor first, so it replaces no node meanwhile), its temp dir by its id, then the
    record."""
    progress(f"{problem}; removing what carries lab {lab_id}'s marker")
    removed: list[str] = []
    supervisor = procs.marked_pids(node_marker(lab_id, "supervisor"))
    for result in (procs.stop_marked(supervisor, lab_id, grace_s=30.0),
                   procs.stop_all_marked(lab_id, grace_s=10.0)):
        removed += [f"pid {pid}" for pid in sorted(result.stopped)]
    temp_dir = lab_temp_dir(lab_id)
    if temp_dir.is_dir() and not temp_dir.is_symlink():
        shutil.rmtree(temp_dir, ignore_errors=True)
        removed.append(f"directory {temp_dir}")
    leftovers = [f"pid {pid}" for pid in sorted(procs.marked_pids(lab_id))]
    if temp_dir.exists():
        leftovers.append(f"directory {temp_dir}")
    if leftovers:
        raise SpotLabTeardownError(f"spot lab {lab_id}: still present after teardown: "
                                   f"{'; '.join(leftovers)} (record kept in "
                                   f"{state_path(lab_id)})")
    state_path(lab_id).unlink(missing_ok=True)
    removed.append(f"record {state_path(lab_id)}")
    note_removed(f"spot lab {lab_id} (corrupt record)")
    progress(f"spot lab {lab_id} removed")
    return removed


def _stop_supervisor(state: dict[str, Any], supervisor: subprocess.Popen[str] | None,
                     config: SpotLabConfig, progress: Progress) -> list[str]:
    """The supervisor first (its teardown: workers drain up to the warning, then the head):
    by its handle when the caller holds it, else by its recorded PID if that still carries
    its marker."""
    grace_s = 2 * config.warning_s + 60.0
    lab_id = state["lab_id"]
    if supervisor is not None:
        if supervisor.poll() is not None:
            return []
        progress(f"stopping spot lab {lab_id}")
        procs.stop_children([supervisor], grace_s=grace_s)
        return [f"supervisor pid {supervisor.pid}"]
    pid = state.get("supervisor_pid")
    if pid is None:
        return []
    result = procs.stop_marked([int(pid)], node_marker(lab_id, "supervisor"), grace_s=grace_s)
    if result.not_ours:
        progress(f"spot lab {lab_id}: recorded supervisor pid {pid} is no longer the lab's "
                 f"(no marker): left alone")
    if result.stopped or result.left:
        progress(f"stopped spot lab {lab_id}'s supervisor")
    return [f"supervisor pid {pid}"] if result.stopped else []


def lab_status(lab_id: str | None = None) -> dict[str, Any]:
    """The recorded lab (without `lab_id`: the only one, or the only one not stale), whether
    it is up, starting or stale (supervisor gone), which of its nodes' processes live, its
    events so far, and every other recorded lab with its condition."""
    state = load_state(lab_id, prefer_live=True)
    lab_id = state["lab_id"]
    nodes = [{**node, "processes_alive": len(procs.marked_pids(node_marker(lab_id,
                                                                             node["name"])))}
             for node in state.get("nodes", [])]
    supervisor_pid = state.get("supervisor_pid")
    temp_dir = _own_temp_dir(state, lambda _: None)
    return {
        "lab_id": lab_id,
        "up": bool(state.get("up")),
        "condition": condition(state),
        "supervisor_alive": supervisor_pid is not None and procs.carries_marker(
            int(supervisor_pid), node_marker(lab_id, "supervisor")),
        "config": state["config"],
        "description": state.get("description"),
        "billing": state.get("billing"),
        "nodes": nodes,
        "events": read_events(temp_dir / "events.jsonl") if temp_dir else [],
        "state_file": str(state_path(lab_id)),
        "other_labs": other_labs(lab_id),
    }


def interrupt(lab_id: str | None, node: str) -> None:
    """Ask the lab's supervisor to preempt spot node `node` now, or to lose on-demand (or
    learner) node `node` now: killed without notice and not replaced, as a failed instance."""
    state = load_state(lab_id, prefer_live=True)
    names = [n["name"] for n in state.get("nodes", []) if n["name"] != "head"]
    if node not in names:
        raise ValueError(f"--node: {node!r} is not a worker node of lab {state['lab_id']} "
                         f"(worker nodes: {', '.join(names) or 'none'})")
    temp_dir = _own_temp_dir(state, lambda _: None)
    if temp_dir is None:
        raise RunFailed(f"spot lab {state['lab_id']} has no temp dir of its own")
    (temp_dir / "interrupts" / node).touch()


def read_events(path: Path) -> list[dict[str, Any]]:
    """The lab's events; a line that is no event (the last one half-written when the
    supervisor was killed) is skipped: the status of a lab must not fail on its history."""
    if not path.exists():
        return []
    events = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            event = parse_json(str(path), line) if line.strip() else None
        except InputFileError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events
