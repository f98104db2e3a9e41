"""What a lab created, persisted so that a later `lab-down` removes exactly that.

The state file is written before each resource is created (namespace names, the temp dir)
and right after each process starts (its PID), so a lab interrupted half-way can still be
torn down completely. It also carries the lab's description once the lab is up.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from netem.lab.addressing import S3_NAMESPACE_ROLE, namespace_name
from vocab.burst import SITE_CLOUD, SITE_ONPREM
from vocab.errors import UserError
from vocab.names import NAME, shown
from workloads.common.input_files import InputFileError, read_input_json
from workloads.common.storage import write_atomically

STATE_DIR_ENV = "SPOTBURST_LAB_STATE_DIR"
MAX_STATE_BYTES = 8 << 20


def state_dir() -> Path:
    """/run/spotburst/labs as root, else under the user's runtime or cache directory."""
    if STATE_DIR_ENV in os.environ:
        return Path(os.environ[STATE_DIR_ENV])
    if os.geteuid() == 0:
        return Path("/run/spotburst/labs")
    runtime = os.environ.get("XDG_RUNTIME_DIR") or str(Path.home() / ".cache")
    return Path(runtime) / "spotburst" / "labs"


@dataclass
class LabState:
    lab_id: str
    temp_dir: str = ""
    namespaces: list[str] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    description: dict[str, Any] | None = None

    @property
    def path(self) -> Path:
        return state_path(self.lab_id)

    def save(self) -> None:
        write_atomically(self.path, json.dumps(asdict(self), indent=2).encode())

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


class LabNotFound(UserError, LookupError):
    """No lab state matches what was asked for."""


class CorruptLabRecord(UserError, ValueError):
    """A lab's state file that is no lab's state (empty, truncated, an unknown field)."""

    def __init__(self, lab_id: str, problem: str) -> None:
        super().__init__(f"{problem} (lab-down --lab {lab_id} removes what the lab's id "
                         f"names)")
        self.lab_id = lab_id


def check_lab_id(lab_id: str) -> str:
    if not NAME.matches(lab_id):
        raise LabNotFound(f"--lab: expected {NAME.rule}, got {shown(lab_id)}")
    return lab_id


def state_path(lab_id: str) -> Path:
    return state_dir() / f"{check_lab_id(lab_id)}.json"


def lab_temp_dir(lab_id: str) -> Path:
    """The one folder a lab creates: a record naming any other is not followed."""
    return Path(tempfile.gettempdir()) / f"sb-{check_lab_id(lab_id)}"


def lab_namespaces(lab_id: str) -> list[str]:
    """The namespaces a lab creates: a record naming any other is not followed."""
    return [namespace_name(check_lab_id(lab_id), part)
            for part in (SITE_ONPREM, SITE_CLOUD, S3_NAMESPACE_ROLE)]


def load_state(lab_id: str | None = None) -> LabState:
    """The state of lab `lab_id`, or of the only lab recorded when no id is given;
    CorruptLabRecord naming the file when it is no lab's state."""
    if lab_id is None:
        known = recorded_lab_ids()
        if not known:
            raise LabNotFound(f"no lab is up (none recorded in {state_dir()})")
        if len(known) != 1:
            listing = ", ".join(known) if known else "none"
            raise LabNotFound(f"give a lab id: {len(known)} labs recorded in {state_dir()} "
                              f"({listing})")
        lab_id = known[0]
    path = state_path(lab_id)
    if not path.exists():
        raise LabNotFound(f"no lab {lab_id!r} recorded in {state_dir()} "
                          f"(known: {', '.join(recorded_lab_ids()) or 'none'})")
    try:
        document = read_input_json("", path, max_bytes=MAX_STATE_BYTES)
    except InputFileError as error:
        raise CorruptLabRecord(lab_id, f"lab record {error}") from None
    problem = _shape_problem(document, lab_id)
    if problem:
        raise CorruptLabRecord(lab_id, f"lab record {path}: {problem}")
    return LabState(**document)


def _shape_problem(document: Any, lab_id: str) -> str | None:
    if not isinstance(document, dict):
        return f"a {type(document).__name__}, not an object"
    unknown = sorted(set(document) - {f.name for f in fields(LabState)})
    if unknown:
        return f"unknown field {unknown[0]!r}"
    if document.get("lab_id") != lab_id:
        return f"lab_id {shown(document.get('lab_id'))} is not the file's id {lab_id!r}"
    if not isinstance(document.get("temp_dir", ""), str):
        return "temp_dir: not a text"
    namespaces = document.get("namespaces", [])
    if not isinstance(namespaces, list) or not all(isinstance(n, str) for n in namespaces):
        return "namespaces: not a list of names"
    pids = document.get("pids", [])
    if not isinstance(pids, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p > 0 for p in pids):
        return "pids: not a list of process ids"
    if document.get("description") is not None and not isinstance(document["description"],
                                                                  dict):
        return "description: not an object"
    return None


def recorded_lab_ids() -> list[str]:
    directory = state_dir()
    if not directory.is_dir():
        return []
    return sorted(path.stem for path in directory.glob("*.json") if NAME.matches(path.stem))
