"""The local spot lab: a Ray cluster on one machine whose spot nodes get a real notice, drain
and die, and are replaced (see spotlab.lab).

The lab itself (spotlab.lab, with numpy and the supervisor) is imported on first use, so that
reading the lab's options (every `invoke` task's flags) stays cheap: a command of the
inference service is a fresh process that must answer within 2 s."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from spotlab.config import SpotLabConfig, SpotLabConfigError
from spotlab.state import SpotLabNotFound, recorded_lab_ids

if TYPE_CHECKING:
    from spotlab.lab import (
        SpotLab,
        SpotLabStartFailed,
        SpotLabTeardownError,
        interrupt,
        lab_status,
        running_lab,
        spot_lab,
        start_lab,
        stop_lab,
    )

_FROM_LAB = frozenset({"SpotLab", "SpotLabStartFailed", "SpotLabTeardownError", "interrupt",
                       "lab_status", "running_lab", "spot_lab", "start_lab", "stop_lab"})


def __getattr__(name: str) -> Any:
    if name in _FROM_LAB:
        return getattr(importlib.import_module("spotlab.lab"), name)
    raise AttributeError(f"module 'spotlab' has no attribute {name!r}")


__all__ = [
    "SpotLab",
    "SpotLabConfig",
    "SpotLabConfigError",
    "SpotLabNotFound",
    "SpotLabStartFailed",
    "SpotLabTeardownError",
    "interrupt",
    "lab_status",
    "recorded_lab_ids",
    "running_lab",
    "spot_lab",
    "start_lab",
    "stop_lab",
]
