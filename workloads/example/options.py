"""The example workload's options: ONE spec, from which its argparse, a run task's flags and
the command line the launcher sends to any target all come."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from workloads.common.options import OptionError, OptionSpec, check_fields, option
from workloads.common.results import ResultsOptions


@dataclass(frozen=True, kw_only=True)
class ExampleOptions(ResultsOptions):
    tasks: int = option(4, "Ray tasks, each drawing --samples random points", minimum=1,
                        maximum=1000)
    samples: int = option(100_000, "random points per task", minimum=1, maximum=10_000_000)
    seed: int = option(0, "seed of the points (task i draws from seed + i)", minimum=0)

    def __post_init__(self) -> None:
        check_fields(self)  # every field's type and bounds
        if self.tasks * self.samples > 1_000_000_000:  # a rule across fields names its flag
            raise OptionError("--samples", f"at most 10^9 points in all, got "
                              f"{self.tasks} x {self.samples}")

    def parameters(self) -> dict[str, Any]:
        return asdict(self)


EXAMPLE_SPEC = OptionSpec(
    ExampleOptions, prog="python -m workloads.example",
    description="π from random points drawn by Ray tasks; writes summary.json, "
    "provenance.json and records/.")
