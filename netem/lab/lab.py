"""The local two-site lab: bring it up, describe it, tear down exactly what it created.

`two_site_lab(profile)` is the context manager; `start_lab` / `stop_lab` are the halves that
`invoke lab-up` and `invoke lab-down` call in separate processes (through the state file).
A process is stopped only when it carries the lab's marker (`procs.stop_marked`): a recorded
PID or a process in one of the lab's namespaces without it is reported and left alone.
"""

from __future__ import annotations

import secrets
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from netem.lab import netns
from netem.lab.addressing import node_specs
from netem.lab.build import Progress, build_lab
from netem.lab.description import LabDescription
from netem.lab.processes import marked_pids
from netem.lab.state import (
    CorruptLabRecord,
    LabNotFound,
    LabState,
    lab_namespaces,
    lab_temp_dir,
    load_state,
)
from netem.profile import Profile
from procs import carries_marker, interrupts_ignored, sigterm_raises_interrupt, stop_marked
from vocab.burst import ROLE_CLOUD, ROLE_HPC, ROLE_LOGIN
from vocab.errors import RunFailed, UserError
from vocab.names import NotOurs, owned


class LabTeardownError(RunFailed, RuntimeError):
    """Something the lab created is still there; the state file is kept for a retry."""


class LabUnavailable(UserError, RuntimeError):
    """This machine cannot build the lab (not root, no `ip netns`); nothing was started."""


def require_lab_support() -> None:
    """Raise LabUnavailable, with one line saying what is needed, unless a lab can be built.

    There is no unshaped fallback: a result labelled with a bandwidth must have run on a
    link shaped to it."""
    supported, reason = netns.netns_supported()
    if not supported:
        raise LabUnavailable(
            "the two-site lab needs root and iproute2 network namespaces (ip netns, tc) "
            f"({reason}); run as root, or run-burst --stack on a deployed stack"
        )


def print_progress(message: str) -> None:
    print(f"[lab {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@contextmanager
def two_site_lab(profile: Profile, *, progress: Progress = print_progress,
                 **options: Any) -> Iterator[LabDescription]:
    """A running lab for the `with` block; removed on exit, exception, Ctrl-C or SIGTERM.

    options: login_cpus, hpc_cpus, cloud_cpus, cloud_nodes, object_store_mb (see start_lab).
    """
    lab = start_lab(profile, progress=progress, **options)
    try:
        with sigterm_raises_interrupt():
            yield lab
    finally:
        stop_lab(lab.lab_id, progress=progress)


def start_lab(
    profile: Profile,
    *,
    login_cpus: int = 1,
    hpc_cpus: int = 2,
    cloud_cpus: int = 2,
    cloud_nodes: int = 1,
    object_store_mb: int = 512,
    progress: Progress = print_progress,
) -> LabDescription:
    """Bring a lab up and leave it running; on any failure or interrupt, remove it again."""
    require_lab_support()
    nodes = node_specs(cloud_nodes)
    cpus = {ROLE_LOGIN: login_cpus, ROLE_HPC: hpc_cpus, ROLE_CLOUD: cloud_cpus}
    for role, count in cpus.items():
        if count < 0:
            raise ValueError(f"{role}_cpus must be >= 0, got {count}")
    if object_store_mb < 80:
        raise ValueError(f"object_store_mb must be >= 80 (Ray's minimum), got {object_store_mb}")
    state = LabState(lab_id=secrets.token_hex(3))
    try:
        with sigterm_raises_interrupt():
            description = build_lab(state, profile, nodes, cpus, object_store_mb << 20, progress)
        state.description = description.to_dict()
        state.save()
        progress(f"lab {state.lab_id} is up: Ray at {description.ray_address}")
        return description
    except BaseException:
        progress(f"lab {state.lab_id} did not come up: removing what it created")
        stop_lab(state, progress=progress)
        raise


def stop_lab(lab: str | LabState | None = None, progress: Progress = print_progress) -> list[str]:
    """Remove a lab's processes, namespaces and temp dir; returns what was removed.

    Ctrl-C is ignored while this runs, so a second Ctrl-C cannot leave a half-removed lab.
    """
    state = lab if isinstance(lab, LabState) else _state_to_remove(lab, progress)
    _drop_what_is_not_ours(state, progress)
    removed: list[str] = []
    with interrupts_ignored():
        # The recorded `ray start --block` processes first: each stops its own node cleanly.
        # A recorded PID that no longer carries the lab's marker names another process now.
        first = stop_marked(state.pids, state.lab_id, grace_s=10)
        if first.stopped or first.left:
            progress(f"stopping {len(first.stopped | first.left)} lab processes")
        stopped, left = set(first.stopped), set(first.left)
        for _ in range(3):  # then whatever is left, and anything started meanwhile
            rest = marked_pids(state.lab_id) - left
            if not rest:
                break
            more = stop_marked(rest, state.lab_id, grace_s=15)
            stopped |= more.stopped
            left |= more.left
        removed += [f"pid {pid}" for pid in sorted(stopped)]
        if first.not_ours:
            progress(f"recorded pids {', '.join(map(str, sorted(first.not_ours)))} are no "
                     f"longer the lab's (no marker): left alone")
        strangers = _unmarked_in_namespaces(state)
        if strangers:
            progress(f"pids {', '.join(map(str, sorted(strangers)))} run in the lab's "
                     f"namespaces without its marker: left alone")
        for namespace in state.namespaces:
            netns.delete_namespace(namespace)
            removed.append(f"namespace {namespace}")
        if state.temp_dir:
            shutil.rmtree(state.temp_dir, ignore_errors=True)
            removed.append(f"directory {state.temp_dir}")
        remaining = _leftovers(state)
        if remaining:
            raise LabTeardownError(f"lab {state.lab_id}: still present after teardown: "
                                   f"{'; '.join(remaining)} (state kept in {state.path})")
        state.remove()
    progress(f"lab {state.lab_id} removed")
    return removed


def _state_to_remove(lab_id: str | None, progress: Progress) -> LabState:
    """The lab's record; for a corrupt one given by id, what its id alone names: the
    processes with its marker, its namespaces, its temp dir."""
    try:
        return load_state(lab_id)
    except CorruptLabRecord as error:
        lab_id = error.lab_id
        progress(f"{error}; removing what lab {lab_id}'s id names")
        present = netns.existing_namespaces()
        return LabState(lab_id=lab_id, temp_dir=str(lab_temp_dir(lab_id)),
                        namespaces=[ns for ns in lab_namespaces(lab_id) if ns in present])


def _drop_what_is_not_ours(state: LabState, progress: Progress) -> None:
    """Forget a recorded namespace or temp dir that is not the one this lab's id names (a
    crafted or damaged record): reported, never removed."""
    ours = lab_namespaces(state.lab_id)
    strangers = [ns for ns in state.namespaces if ns not in ours]
    if strangers:
        progress(f"lab {state.lab_id}: recorded namespaces {', '.join(map(repr, strangers))} "
                 f"are not the lab's: left alone")
        state.namespaces = [ns for ns in state.namespaces if ns in ours]
    if state.temp_dir:
        try:
            owned(state.temp_dir, lab_temp_dir(state.lab_id))
        except NotOurs as error:
            progress(f"lab {state.lab_id}: recorded temp_dir {error}")
            state.temp_dir = ""


def running_lab(lab_id: str | None = None) -> LabDescription:
    """The description of a lab started earlier (`invoke lab-up`), to run a workload in it."""
    state = load_state(lab_id)
    if state.description is None:
        raise LabNotFound(f"lab {state.lab_id} is not up (it is starting or failed to start)")
    return LabDescription.from_dict(state.description)


def lab_status(lab_id: str | None = None) -> dict[str, Any]:
    """The recorded description of a lab plus what of it is alive now."""
    state = load_state(lab_id)
    live_namespaces = netns.existing_namespaces() if state.namespaces else set()
    return {
        "lab_id": state.lab_id,
        "up": state.description is not None,
        "processes_alive": sorted(marked_pids(state.lab_id)),
        "namespaces_present": [ns for ns in state.namespaces if ns in live_namespaces],
        "description": state.description,
        "state_file": str(state.path),
    }


def _unmarked_in_namespaces(state: LabState) -> set[int]:
    pids: set[int] = set()
    for namespace in state.namespaces:
        pids |= netns.namespace_pids(namespace)
    return {pid for pid in pids if not carries_marker(pid, state.lab_id)}


def _leftovers(state: LabState) -> list[str]:
    remaining = [f"pid {pid}" for pid in sorted(marked_pids(state.lab_id))]
    present = netns.existing_namespaces() if state.namespaces else set()
    remaining += [f"namespace {ns}" for ns in state.namespaces if ns in present]
    if state.temp_dir and Path(state.temp_dir).exists():
        remaining.append(f"directory {state.temp_dir}")
    return remaining
