"""A spot lab's state file: what it created, so `spot-lab-down` (another process) removes
exactly that, and `spot-lab-status` can show it.

`/run/spotburst/spotlabs/<lab id>.json` as root ($SPOTBURST_SPOTLAB_STATE_DIR overrides). The
temp dir and every node's name are recorded before they are created, every PID right after
its process starts, so an interrupted lab can still be removed completely. It holds the
lab's live nodes only: a node leaves it once its processes are gone (the lab's history is its
`events.jsonl`). Written by the lab's starter until its supervisor runs, then by the
supervisor alone, always atomically. The Ray token lives in the lab's temp dir only; the
state file names its path.

A recorded lab is `up`, `starting` or `stale`: its supervisor (or, before the supervisor
runs, its starter) is gone, so nothing will ever remove it but `spot-lab-down`. The
supervisor counts as alive only while its recorded PID carries the lab's marker (a recorded
PID may name another process by now).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import procs
from netem.lab.state import state_dir as two_site_state_dir
from vocab.errors import UserError
from workloads.common.storage import write_atomically

STATE_DIR_ENV = "SPOTBURST_SPOTLAB_STATE_DIR"
UP, STARTING, STALE = "up", "starting", "stale"
CONDITION_TEXT = {UP: "up", STARTING: "starting", STALE: "stale: supervisor gone"}


class SpotLabNotFound(UserError, LookupError):
    """No recorded spot lab matches what was asked for."""


def node_marker(lab_id: str, name: str) -> str:
    """The value of MARKER_ENV on every process of one lab node (Ray passes it on to its
    daemons and workers), and on the lab's supervisor (name `supervisor`): what finds and
    proves whatever is left of them (`procs.stop_marked(pids, lab_id)`)."""
    return f"{lab_id}/{name}"


def state_dir() -> Path:
    """Beside the two-site labs' directory: /run/spotburst/spotlabs as root."""
    if STATE_DIR_ENV in os.environ:
        return Path(os.environ[STATE_DIR_ENV])
    return two_site_state_dir().parent / "spotlabs"


def state_path(lab_id: str) -> Path:
    return state_dir() / f"{lab_id}.json"


def save_state(state: dict[str, Any]) -> None:
    write_atomically(state_path(state["lab_id"]), json.dumps(state, indent=2).encode())


def recorded_lab_ids() -> list[str]:
    directory = state_dir()
    return sorted(p.stem for p in directory.glob("*.json")) if directory.is_dir() else []


def starter_identity() -> dict[str, int | None]:
    """This process as a lab's starter: its PID and start time (a PID alone may be reused)."""
    return {"pid": os.getpid(), "start_time": procs.start_time(os.getpid())}


def condition(state: dict[str, Any]) -> str:
    """UP, STARTING or STALE (see the module docstring)."""
    supervisor = state.get("supervisor_pid")
    if supervisor is not None and procs.carries_marker(
            int(supervisor), node_marker(state["lab_id"], "supervisor")):
        return UP if state.get("up") else STARTING
    starter = state.get("starter") or {}
    if (supervisor is None and starter.get("pid") is not None
            and procs.start_time(int(starter["pid"])) == starter.get("start_time")):
        return STARTING
    return STALE


def describe(state: dict[str, Any]) -> str:
    """`<id> (<condition>)`, as a listing of labs shows it."""
    return f"{state['lab_id']} ({CONDITION_TEXT[condition(state)]})"


def load_state(lab_id: str | None = None, *, prefer_live: bool = False) -> dict[str, Any]:
    """The state of lab `lab_id`; without one, of the only recorded lab, stale or not, or,
    with `prefer_live`, of the only one that is not stale. Otherwise SpotLabNotFound, in one
    line listing every recorded lab with its condition."""
    if lab_id is None:
        states = [state for state in map(_read, recorded_lab_ids()) if state is not None]
        if not states:
            raise SpotLabNotFound(f"no spot lab is up (none recorded in {state_dir()})")
        live = [state for state in states if condition(state) != STALE]
        if len(states) == 1:
            return states[0]
        if prefer_live and len(live) == 1:
            return live[0]
        listing = ", ".join(describe(state) for state in states)
        raise SpotLabNotFound(f"--lab: {len(states)} spot labs recorded in {state_dir()}: "
                              f"{listing}; give one with --lab ID")
    state = _read(lab_id)
    if state is None:
        known_ids = ", ".join(recorded_lab_ids()) or "none"
        raise SpotLabNotFound(f"--lab: no spot lab {lab_id!r} in {state_dir()} (known: "
                              f"{known_ids})")
    return state


def other_labs(lab_id: str) -> list[dict[str, str]]:
    """Every recorded lab but `lab_id`, with its condition."""
    states = [state for state in map(_read, recorded_lab_ids()) if state is not None]
    return [{"lab_id": state["lab_id"], "condition": condition(state)} for state in states
            if state["lab_id"] != lab_id]


def _read(lab_id: str) -> dict[str, Any] | None:
    """A lab's state, None if it is not recorded (removed meanwhile)."""
    try:
        state: dict[str, Any] = json.loads(state_path(lab_id).read_text())
    except FileNotFoundError:
        return None
    return state
