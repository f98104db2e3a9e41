"""What a run task hands to a target: which workload module to run, with which arguments,
and which local input files must travel with the code."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class WorkloadRun:
    name: str  # results land in results/<name>/<timestamp>
    module: str  # run as `python -m <module>`
    args: tuple[str, ...] = ()
    # flag -> local file; the flag is added pointing at the file, wherever the code runs
    inputs: dict[str, Path] = field(default_factory=dict)

    def command(self, out: str, target: str, input_paths: dict[str, str]) -> list[str]:
        """The workload's command line (without the interpreter)."""
        command = ["-m", self.module, *self.args]
        for flag in sorted(self.inputs):
            command += [flag, input_paths[flag]]
        return [*command, "--out", out, "--target", target]
