"""`invoke run-doll`: the DOLL workload's command line, made from its option spec and handed
to the one target path, and its figures drawn here from the records that came back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from launch.options import RequirementsOptions, TargetOptions
from launch.requirements import user_requirements
from launch.targets import run_workload
from launch.workload import WorkloadRun, workload_run
from workloads.doll.experiment import check_inputs
from workloads.doll.figures import draw, draw_sim
from workloads.doll.options import DOLL_SPEC, DollOptions, SimOptions


def doll_run(options: DollOptions, requirements: tuple[str, ...] = ()) -> WorkloadRun:
    """Check the input files here (the options checked themselves): the price and capacity
    traces and the policy file, which travels with the code as --policy-file, with the
    `requirements` its imports need; the run."""
    check_inputs(options)
    policy_file = options.user_policy_file()
    if policy_file is not None:
        options = replace(options, policy_file=policy_file)
    return workload_run("doll", "workloads.doll", DOLL_SPEC, options, requirements)


def run_doll(
    options: DollOptions,
    target: TargetOptions | None = None,
    show: Callable[[str], None] = print,
    requirements: RequirementsOptions | None = None,
) -> Path:
    """Run DOLL on the target once its inputs are checked, then draw its figures; returns
    the local results folder. `requirements`: what the user's policy needs, installed with
    the job on a cluster (checked installed here otherwise)."""
    target = target or TargetOptions()
    needs = user_requirements(requirements.requirements if requirements else None,
                              local=not (target.address or target.stack))
    run = doll_run(options, needs)
    folder = run_workload(run, target.address, target.stack, target.out, show,
                          stall_timeout_s=target.stall_timeout)
    draw(folder)
    return folder


def sim_doll(options: SimOptions, out: Path | None = None,
             show: Callable[[str], None] = print) -> Path:
    """Replay every policy over the capacity traces, start points and seeds (no Ray), then
    draw the figures; returns the results folder."""
    from workloads.doll.sim import simulate

    folder = simulate(options, out, show)
    draw_sim(folder)
    return folder
