"""The example workload's launcher (docs/adding-a-workload.md): its command line, made from
its option spec, handed to the one target path; returns the local results folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from launch.options import TargetOptions
from launch.targets import run_workload
from launch.workload import workload_run
from workloads.example.options import EXAMPLE_SPEC, ExampleOptions


def run_example(options: ExampleOptions, target: TargetOptions | None = None,
                show: Callable[[str], None] = print) -> Path:
    """Run the example on the target: a Ray started here by default, or `--address`."""
    target = target or TargetOptions()
    run = workload_run("example", "workloads.example", EXAMPLE_SPEC, options)
    return run_workload(run, target.address, target.stack, target.out, show,
                        stall_timeout_s=target.stall_timeout)
