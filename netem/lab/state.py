"""What a lab created, persisted so that a later `lab-down` removes exactly that.

The state file is written before each resource is created (namespace names, the temp dir)
and right after each process starts (its PID), so a lab interrupted half-way can still be
torn down completely. It also carries the lab's description once the lab is up.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vocab.errors import UserError
from workloads.common.storage import write_atomically

STATE_DIR_ENV = "SPOTBURST_LAB_STATE_DIR"


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
        return state_dir() / f"{self.lab_id}.json"

    def save(self) -> None:
        write_atomically(self.path, json.dumps(asdict(self), indent=2).encode())

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


class LabNotFound(UserError, LookupError):
    """No lab state matches what was asked for."""


def load_state(lab_id: str | None = None) -> LabState:
    """The state of lab `lab_id`, or of the only lab recorded when no id is given."""
    if lab_id is None:
        known = recorded_lab_ids()
        if not known:
            raise LabNotFound(f"no lab is up (none recorded in {state_dir()})")
        if len(known) != 1:
            listing = ", ".join(known) if known else "none"
            raise LabNotFound(f"give a lab id: {len(known)} labs recorded in {state_dir()} "
                              f"({listing})")
        lab_id = known[0]
    path = state_dir() / f"{lab_id}.json"
    if not path.exists():
        raise LabNotFound(f"no lab {lab_id!r} recorded in {state_dir()} "
                          f"(known: {', '.join(recorded_lab_ids()) or 'none'})")
    return LabState(**json.loads(path.read_text()))


def recorded_lab_ids() -> list[str]:
    directory = state_dir()
    if not directory.is_dir():
        return []
    return sorted(path.stem for path in directory.glob("*.json"))
