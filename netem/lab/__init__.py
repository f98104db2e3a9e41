"""The local two-site lab (see netem.lab.lab)."""

from netem.lab.description import LabDescription
from netem.lab.lab import (
    LabTeardownError,
    lab_status,
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
    "lab_status",
    "recorded_lab_ids",
    "running_lab",
    "start_lab",
    "stop_lab",
    "two_site_lab",
]
