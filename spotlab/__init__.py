"""The local spot lab: a Ray cluster on one machine whose spot nodes get a real notice, drain
and die, and are replaced (see spotlab.lab)."""

from spotlab.config import SpotLabConfig, SpotLabConfigError
from spotlab.lab import (
    SpotLab,
    SpotLabTeardownError,
    interrupt,
    lab_status,
    running_lab,
    spot_lab,
    start_lab,
    stop_lab,
)
from spotlab.state import SpotLabNotFound, recorded_lab_ids

__all__ = [
    "SpotLab",
    "SpotLabConfig",
    "SpotLabConfigError",
    "SpotLabNotFound",
    "SpotLabTeardownError",
    "interrupt",
    "lab_status",
    "recorded_lab_ids",
    "running_lab",
    "spot_lab",
    "start_lab",
    "stop_lab",
]
