"""`invoke run-doll`: the DOLL workload's command line, made from its option spec and handed
to the one target path, and its figures drawn here from the records that came back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from launch.options import RequirementsOptions, TargetOptions
from launch.requirements import user_requirements
from launch.targets import run_workload
from launch.workload import workload_run
from workloads.common.spot_market.trace import load_trace
from workloads.doll.figures import draw
from workloads.doll.options import DOLL_SPEC, DollOptions


def run_doll(
    options: DollOptions,
    target: TargetOptions | None = None,
    show: Callable[[str], None] = print,
    requirements: RequirementsOptions | None = None,
) -> Path:
    """Check the trace here (the options checked themselves), run DOLL on the target, then
    draw its figures; returns the local results folder. `requirements`: what the user's
    code needs, installed with the job on a cluster (checked installed here otherwise)."""
    target = target or TargetOptions()
    needs = user_requirements(requirements.requirements if requirements else None,
                              local=not (target.address or target.stack))
    load_trace(options.trace, options.zone, options.product)
    run = workload_run("doll", "workloads.doll", DOLL_SPEC, options, needs)
    folder = run_workload(run, target.address, target.stack, target.out, show,
                          stall_timeout_s=target.stall_timeout)
    draw(folder)
    return folder
