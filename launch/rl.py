"""`invoke run-rl`: the RL workload's command line, made from its option spec and handed to
the one target path (a new spot lab by default, --address, --stack), and its figures drawn
here from the records that came back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from launch.options import TargetOptions
from launch.targets import run_workload
from launch.workload import workload_run
from spotlab.config import SpotLabConfig
from spotlab.options import SpotLabOptions
from workloads.rl.envs import check_env
from workloads.rl.figures import draw
from workloads.rl.options import RL_SPEC, RlOptions


def rl_lab(options: RlOptions, lab: SpotLabOptions) -> SpotLabConfig:
    """The lab of a local run: as the lab flags say, with a learner node when the learner is
    to be placed on one and none was asked for (the lab's own default has none)."""
    config = lab.config()
    if options.learner_on == "learner" and config.learner == 0:
        config = replace(config, learner=1)
    return config


def run_rl(
    options: RlOptions,
    target: TargetOptions | None = None,
    lab: SpotLabOptions | None = None,
    show: Callable[[str], None] = print,
) -> Path:
    """Check the environment here (before any lab starts), run the workload on the target,
    then draw its figures; returns the local results folder."""
    target = target or TargetOptions()
    check_env(options.env)
    run = workload_run("rl", "workloads.rl", RL_SPEC, options)
    local = not (target.address or target.stack)
    config = rl_lab(options, lab or SpotLabOptions()) if local else None
    folder = run_workload(run, target.address, target.stack, target.out, show, lab=config)
    draw(folder)
    return folder
