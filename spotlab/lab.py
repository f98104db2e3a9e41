"""The local spot lab: bring one up, look at it, preempt a node by hand, remove it.

`spot_lab(config)` is the context manager; `start_lab` / `stop_lab` are the halves that
`invoke spot-lab-up` and `spot-lab-down` call from separate processes (through the state
file). A lab is one supervisor process (spotlab.supervisor) that owns the lab's Ray nodes and
drives their preemptions; starting a lab spawns it and waits for its ready line, stopping
a lab sends it SIGTERM, then removes by PID and by marker anything it left.
"""

from __future__ import annotations

import json
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
from netem.lab.processes import MARKER_ENV, marked_pids
from spotlab.config import SpotLabConfig
from spotlab.state import load_state, save_state, state_path
from spotlab.supervisor import READY_LINE, lab_env, node_marker
from vocab.errors import RunFailed

START_TIMEOUT_S = 600.0
Progress = Callable[[str], None]


class SpotLabTeardownError(RunFailed, RuntimeError):
    """Something the lab created is still there; its state file is kept for a retry."""


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
    """Bring a lab up and leave it running; on failure or Ctrl-C, remove it again."""
    lab_id = secrets.token_hex(3)
    temp_dir = Path(tempfile.gettempdir()) / f"sbs-{lab_id}"
    state: dict[str, Any] = {"lab_id": lab_id, "config": config.to_dict(),
                             "temp_dir": str(temp_dir), "supervisor_pid": None, "up": False,
                             "nodes": []}
    supervisor: subprocess.Popen[str] | None = None
    progress(f"starting spot lab {lab_id}: head + {config.on_demand} on-demand + "
             f"{config.learner} learner + {config.spot} spot nodes")
    try:
        with procs.sigterm_raises_interrupt():
            save_state(state)  # the temp dir is recorded before it exists
            temp_dir.mkdir(mode=0o700)
            (temp_dir / "logs").mkdir()
            (temp_dir / "interrupts").mkdir()
            token = temp_dir / "ray_auth_token"
            token.touch(mode=0o600)
            token.write_text(secrets.token_hex(32))
            log = temp_dir / "logs" / "supervisor.log"
            supervisor = procs.spawn(
                [sys.executable, "-m", "spotlab", lab_id],
                env={**lab_env(temp_dir), MARKER_ENV: node_marker(lab_id, "supervisor")},
                log_path=log,
            )
            procs.wait_for_file_line(supervisor, log, READY_LINE, timeout_s=START_TIMEOUT_S,
                                     name=f"spot lab {lab_id}")
        lab = running_lab(lab_id)
        progress(f"spot lab {lab_id} is up: Ray at {lab.ray_address}")
        return lab
    except BaseException:
        progress(f"spot lab {lab_id} did not come up: removing what it created")
        stop_lab(lab_id, progress=progress, supervisor=supervisor)
        raise


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
    state = load_state(lab_id)
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
             save_events: Path | None = None) -> list[str]:
    """Remove a lab: its supervisor (which stops its nodes), anything left of them by PID and
    marker, its temp dir and its state file. Returns what was removed. Ctrl-C is ignored
    meanwhile, so a second Ctrl-C cannot leave half a lab."""
    with procs.interrupts_ignored():
        state = load_state(lab_id)
        lab_id = state["lab_id"]
        config = SpotLabConfig.from_dict(state["config"])
        temp_dir = Path(state["temp_dir"])
        if save_events is not None and (temp_dir / "events.jsonl").exists():
            save_events.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(temp_dir / "events.jsonl", save_events)
        removed: list[str] = []
        supervisor_pid = supervisor.pid if supervisor is not None else state["supervisor_pid"]
        if supervisor_pid is not None and procs.is_alive(supervisor_pid):
            progress(f"stopping spot lab {lab_id}")
            # Its teardown: workers drain up to the warning, then the head.
            procs.stop_pids([supervisor_pid], grace_s=2 * config.warning_s + 60.0)
            removed.append(f"supervisor pid {supervisor_pid}")
        if supervisor is not None:
            supervisor.poll()
        state = load_state(lab_id)  # the supervisor may have added nodes meanwhile
        pids = _lab_pids(state)
        if pids:
            progress(f"stopping {len(pids)} processes the supervisor left")
        left = procs.stop_pids(pids, grace_s=5.0)
        removed += [f"pid {pid}" for pid in sorted(pids - left)]
        removed += [f"node {node['name']} (pid {node['pid']})" for node in state["nodes"]
                    if node["pid"] is not None]
        if temp_dir.exists():
            shutil.rmtree(temp_dir, ignore_errors=True)
            removed.append(f"directory {temp_dir}")
        leftovers = [f"pid {pid}" for pid in sorted(_lab_pids(state))]
        if temp_dir.exists():
            leftovers.append(f"directory {temp_dir}")
        if leftovers:
            raise SpotLabTeardownError(f"spot lab {lab_id}: still present after teardown: "
                                       f"{'; '.join(leftovers)} (state kept in "
                                       f"{state_path(lab_id)})")
        state_path(lab_id).unlink(missing_ok=True)
    progress(f"spot lab {lab_id} removed")
    return removed


def lab_status(lab_id: str | None = None) -> dict[str, Any]:
    """The recorded lab, which of its nodes' processes live, and its events so far."""
    state = load_state(lab_id)
    temp_dir = Path(state["temp_dir"])
    nodes = []
    for node in state.get("nodes", []):
        pids = marked_pids(node_marker(state["lab_id"], node["name"]))
        nodes.append({**node, "processes_alive": len(pids)})
    supervisor_pid = state.get("supervisor_pid")
    return {
        "lab_id": state["lab_id"],
        "up": bool(state.get("up")),
        "supervisor_alive": supervisor_pid is not None and procs.is_alive(int(supervisor_pid)),
        "config": state["config"],
        "description": state.get("description"),
        "billing": state.get("billing"),
        "nodes": nodes,
        "events": read_events(temp_dir / "events.jsonl"),
        "state_file": str(state_path(state["lab_id"])),
    }


def interrupt(lab_id: str | None, node: str) -> None:
    """Ask the lab's supervisor to preempt spot node `node` now, or to lose on-demand (or
    learner) node `node` now: killed without notice and not replaced, as a failed instance."""
    state = load_state(lab_id)
    names = [n["name"] for n in state.get("nodes", []) if n["name"] != "head"]
    if node not in names:
        raise ValueError(f"--node: {node!r} is not a worker node of lab {state['lab_id']} "
                         f"(worker nodes: {', '.join(names) or 'none'})")
    (Path(state["temp_dir"]) / "interrupts" / node).touch()


def read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _lab_pids(state: dict[str, Any]) -> set[int]:
    names = ["supervisor", *(node["name"] for node in state.get("nodes", []))]
    pids: set[int] = set()
    for name in names:
        pids |= marked_pids(node_marker(state["lab_id"], name))
    recorded = [state.get("supervisor_pid"), *(n["pid"] for n in state.get("nodes", []))]
    return pids | {pid for pid in recorded if pid is not None and procs.is_alive(pid)}
