"""`invoke run-elastic`: the elastic workload's command line, made from its option spec, the
script (and its working dir) shipped with the code, handed to the one target path (a fresh
spot lab by default, --address or --stack); its figure drawn here from the records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from launch.options import TargetOptions
from launch.targets import run_workload
from launch.workload import WorkloadRun
from spotlab.options import SpotLabOptions
from workloads.elastic.entry import check_script
from workloads.elastic.figures import draw
from workloads.elastic.options import ELASTIC_SPEC, ElasticOptions


def elastic_run(options: ElasticOptions) -> WorkloadRun:
    """The run: with --working-dir the whole folder travels and --script names the script
    inside it; without, the script file alone travels."""
    args = ELASTIC_SPEC.argv(options, paths=False)
    inputs: dict[str, Path]
    if options.working_dir is not None:
        inputs = {"--working-dir": options.working_dir}
        args += ["--script", options.script.as_posix()]
    else:
        inputs = {"--script": options.script}
    return WorkloadRun(name="elastic", module="workloads.elastic", args=tuple(args),
                       inputs=inputs)


def run_elastic(
    options: ElasticOptions,
    target: TargetOptions | None = None,
    lab: SpotLabOptions | None = None,
    show: Callable[[str], None] = print,
) -> Path:
    """Check the script here, run the training on the target (a new spot lab with `lab`'s
    options when no --address/--stack), then draw its figure; returns the results folder."""
    target = target or TargetOptions()
    lab = lab or SpotLabOptions()
    options.check_files()
    check_script(options.script_path())
    run = elastic_run(options)
    folder = run_workload(run, target.address, target.stack, target.out, show,
                          lab=lab.config())
    draw(folder)
    return folder
