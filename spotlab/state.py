"""A spot lab's state file: what it created, so `spot-lab-down` (another process) removes
exactly that, and `spot-lab-status` can show it.

`/run/spotburst/spotlabs/<lab id>.json` as root ($SPOTBURST_SPOTLAB_STATE_DIR overrides). The
temp dir and every node's name are recorded before they are created, every PID right after
its process starts, so an interrupted lab can still be removed completely. Written by the
lab's starter until its supervisor runs, then by the supervisor alone, always atomically.
The Ray token lives in the lab's temp dir only; the state file names its path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from netem.lab.state import state_dir as two_site_state_dir
from vocab.errors import UserError

STATE_DIR_ENV = "SPOTBURST_SPOTLAB_STATE_DIR"


class SpotLabNotFound(UserError, LookupError):
    """No recorded spot lab matches what was asked for."""


def state_dir() -> Path:
    """Beside the two-site labs' directory: /run/spotburst/spotlabs as root."""
    if STATE_DIR_ENV in os.environ:
        return Path(os.environ[STATE_DIR_ENV])
    return two_site_state_dir().parent / "spotlabs"


def state_path(lab_id: str) -> Path:
    return state_dir() / f"{lab_id}.json"


def save_state(state: dict[str, Any]) -> None:
    path = state_path(state["lab_id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(f".{os.getpid()}.tmp")
    scratch.write_text(json.dumps(state, indent=2))
    scratch.replace(path)


def recorded_lab_ids() -> list[str]:
    directory = state_dir()
    return sorted(p.stem for p in directory.glob("*.json")) if directory.is_dir() else []


def load_state(lab_id: str | None = None) -> dict[str, Any]:
    """The state of lab `lab_id`, or of the only recorded lab when none is given."""
    if lab_id is None:
        known = recorded_lab_ids()
        if not known:
            raise SpotLabNotFound(f"no spot lab is up (none recorded in {state_dir()})")
        if len(known) != 1:
            listing = ", ".join(known) or "none"
            raise SpotLabNotFound(f"--lab: {len(known)} spot labs recorded in {state_dir()} "
                                  f"({listing}); give one")
        lab_id = known[0]
    path = state_path(lab_id)
    if not path.exists():
        known_ids = ", ".join(recorded_lab_ids()) or "none"
        raise SpotLabNotFound(f"--lab: no spot lab {lab_id!r} in {state_dir()} (known: "
                              f"{known_ids})")
    state: dict[str, Any] = json.loads(path.read_text())
    return state
