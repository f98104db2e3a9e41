"""What a run task hands to a target: which workload module to run, with which arguments,
and which local input files must travel with the code."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workloads.common.options import OptionSpec


@dataclass(frozen=True, kw_only=True)
class WorkloadRun:
    name: str  # results land in results/<name>/<timestamp>
    module: str  # run as `python -m <module>`
    args: tuple[str, ...] = ()
    # flag -> local file; the flag is added pointing at the file, wherever the code runs
    inputs: dict[str, Path] = field(default_factory=dict)
    # the user's own requirement lines (--requirements), installed with ours on a cluster
    requirements: tuple[str, ...] = ()
    # the environment of the run's driver alone (a secret: never on its command line, never
    # a file in the code the job uploads, which is every Ray worker's working folder)
    env: dict[str, str] = field(default_factory=dict)

    def command(self, out: str, target: str, input_paths: dict[str, str]) -> list[str]:
        """The workload's command line (without the interpreter)."""
        command = ["-m", self.module, *self.args]
        for flag in sorted(self.inputs):
            command += [flag, input_paths[flag]]
        return [*command, "--out", out, "--target", target]


def workload_run(name: str, module: str, spec: OptionSpec[Any], options: Any,
                 requirements: tuple[str, ...] = ()) -> WorkloadRun:
    """The run of `options`, its command line made by the workload's spec; files named by
    path options travel with the code as inputs, `requirements` are installed with it."""
    return WorkloadRun(
        name=name,
        module=module,
        args=tuple(spec.argv(options, paths=False)),
        inputs=spec.paths_of(options),
        requirements=requirements,
    )
