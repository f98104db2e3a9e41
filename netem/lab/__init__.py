"""The local two-site lab (see netem.lab.lab)."""

from netem.lab.description import LabDescription
from netem.lab.lab import (
    LabTeardownError,
    LabUnavailable,
    lab_status,
    require_lab_support,
    running_lab,
    start_lab,
    stop_lab,
    two_site_lab,
)
from netem.lab.state import LabNotFound, recorded_lab_ids

__all__ = [
    "LabDescription",
    "LabNotFound",
    "LabTeardownError",
    "LabUnavailable",
    "lab_status",
    "recorded_lab_ids",
    "require_lab_support",
    "running_lab",
    "start_lab",
    "stop_lab",
    "two_site_lab",
]
