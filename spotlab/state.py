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
import tempfile
from pathlib import Path
from typing import Any

import procs
from netem.lab.state import state_dir as two_site_state_dir
from vocab.errors import UserError
from vocab.names import NAME, shown
from workloads.common.input_files import InputFileError, read_input_json
from workloads.common.storage import write_atomically

STATE_DIR_ENV = "SPOTBURST_SPOTLAB_STATE_DIR"
UP, STARTING, STALE, CORRUPT = "up", "starting", "stale", "corrupt"
CONDITION_TEXT = {UP: "up", STARTING: "starting", STALE: "stale: supervisor gone",
                  CORRUPT: "corrupt record: spot-lab-down --lab ID removes it"}
MAX_STATE_BYTES = 8 << 20


class SpotLabNotFound(UserError, LookupError):
    """No recorded spot lab matches what was asked for."""


class CorruptRecord(UserError, ValueError):
    """A lab's state file that cannot be read as one (empty, truncated, wrong shape): the
    lab's processes are still found by their marker, its temp dir by its id."""


def check_lab_id(lab_id: str) -> str:
    if not NAME.matches(lab_id):
        raise SpotLabNotFound(f"--lab: expected {NAME.rule}, got {shown(lab_id)}")
    return lab_id


def lab_temp_dir(lab_id: str) -> Path:
    """The one folder a lab creates (its logs, events, token, each node's Ray session): a
    record naming any other is not followed."""
    return Path(tempfile.gettempdir()) / f"sbs-{check_lab_id(lab_id)}"


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
    return state_dir() / f"{check_lab_id(lab_id)}.json"


def save_state(state: dict[str, Any]) -> None:
    write_atomically(state_path(state["lab_id"]), json.dumps(state, indent=2).encode())


def recorded_lab_ids() -> list[str]:
    directory = state_dir()
    if not directory.is_dir():
        return []
    return sorted(p.stem for p in directory.glob("*.json") if NAME.matches(p.stem))


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
        states = readable_states()
        if not states:
            corrupt = corrupt_lab_ids()
            if corrupt:
                raise SpotLabNotFound(f"--lab: the only spot lab records in {state_dir()} "
                                      f"are corrupt ({', '.join(corrupt)}); spot-lab-down "
                                      f"--lab ID removes what is left of such a lab")
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
    """Every recorded lab but `lab_id`, with its condition (a corrupt record's is CORRUPT)."""
    listed = [{"lab_id": state["lab_id"], "condition": condition(state)}
              for state in readable_states()]
    listed += [{"lab_id": other, "condition": CORRUPT} for other in corrupt_lab_ids()]
    return sorted((lab for lab in listed if lab["lab_id"] != lab_id),
                  key=lambda lab: lab["lab_id"])


def ports_of_other_labs(lab_id: str) -> set[int]:
    """Every port another recorded lab handed to its nodes: a port a node was given but has
    not bound (or never binds, as some roles' ports) looks free to a second lab."""
    return {int(port) for state in readable_states() if state.get("lab_id") != lab_id
            for node in state.get("nodes", []) for port in node.get("ports", {}).values()}


def readable_states() -> list[dict[str, Any]]:
    """The state of every recorded lab whose record can be read (corrupt ones skipped)."""
    states = []
    for lab_id in recorded_lab_ids():
        try:
            state = _read(lab_id)
        except CorruptRecord:
            continue
        if state is not None:
            states.append(state)
    return states


def corrupt_lab_ids() -> list[str]:
    corrupt = []
    for lab_id in recorded_lab_ids():
        try:
            _read(lab_id)
        except CorruptRecord:
            corrupt.append(lab_id)
    return corrupt


def _read(lab_id: str) -> dict[str, Any] | None:
    """A lab's state, None if it is not recorded (removed meanwhile); CorruptRecord, naming
    the file, if it is not a lab's state of that id."""
    path = state_path(lab_id)
    if not path.exists():
        return None
    try:
        state = read_input_json("", path, max_bytes=MAX_STATE_BYTES)
    except InputFileError as error:
        if not path.exists():
            return None
        raise CorruptRecord(f"spot lab record {error}") from None
    problem = _shape_problem(state, lab_id)
    if problem:
        raise CorruptRecord(f"spot lab record {path}: {problem}")
    assert isinstance(state, dict)
    return state


def _shape_problem(state: Any, lab_id: str) -> str | None:
    """What makes `state` no state of lab `lab_id`, None if nothing does."""
    if not isinstance(state, dict):
        return f"a {type(state).__name__}, not an object"
    if state.get("lab_id") != lab_id:
        return f"lab_id {shown(state.get('lab_id'))} is not the file's id {lab_id!r}"
    if not isinstance(state.get("config"), dict):
        return "config: not an object"
    if state.get("temp_dir") is not None and not isinstance(state["temp_dir"], str):
        return "temp_dir: not a text"
    pid = state.get("supervisor_pid")
    if pid is not None and (not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0):
        return f"supervisor_pid: {shown(pid)} is not a process id"
    nodes = state.get("nodes", [])
    if not isinstance(nodes, list):
        return "nodes: not a list"
    for index, node in enumerate(nodes):
        if not isinstance(node, dict) or not isinstance(node.get("name"), str):
            return f"nodes[{index}]: not an object with a name"
        pid = node.get("pid")
        if pid is not None and (not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0):
            return f"nodes[{index}].pid: {shown(pid)} is not a process id"
    for key in ("starter", "description", "billing"):
        if state.get(key) is not None and not isinstance(state[key], dict):
            return f"{key}: not an object"
    return None
