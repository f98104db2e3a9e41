"""The local two-site lab behind `invoke lab-up`, `lab-down`, `lab-status`, `measure-link`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from launch.options import MeasureLinkOptions, TwoSiteLabOptions
from launch.targets import fresh_results_folder
from netem.lab import LabDescription, lab_status, start_lab, stop_lab
from netem.measure import format_table, measure_link
from netem.profile import load_profile


def lab_up(options: TwoSiteLabOptions) -> LabDescription:
    """Start a lab for the profile (a name, a file or --bw) and leave it running."""
    return start_lab(load_profile(options.profile, options.bw), cloud_nodes=options.cloud_nodes,
                     hpc_cpus=options.hpc_cpus, cloud_cpus=options.cloud_cpus)


def lab_down(lab_id: str | None) -> list[str]:
    return stop_lab(lab_id)


def lab_report(lab_id: str | None) -> str:
    """A lab's recorded description and what of it is alive, as JSON text."""
    status: dict[str, Any] = lab_status(lab_id)
    return json.dumps(status, indent=2)


def measure(options: MeasureLinkOptions) -> tuple[Path, str]:
    """Measure a fresh lab's link both ways into link.json; returns its folder and a table."""
    folder = fresh_results_folder(options.out, "measure-link")
    link = measure_link(load_profile(options.profile, options.bw), folder,
                        seconds=options.seconds)
    return folder, format_table(link)
