"""`invoke run-doll`: the DOLL workload's command line, handed to the one target path, and
its figures drawn here from the records that came back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from launch.targets import run_workload
from launch.workload import WorkloadRun
from workloads.doll.config import from_args
from workloads.doll.figures import draw
from workloads.doll.trace import load_trace


@dataclass(frozen=True)
class DollOptions:
    """The flags as the user typed them (None: not given); the workload's own parser
    checks them."""

    policy: str | None = None
    deadline: str | None = None
    alpha: str | None = None
    workers: str | None = None
    rates: str | None = None
    trace: Path | None = None
    zone: str | None = None
    product: str | None = None
    on_demand_price: str | None = None
    preemption: str | None = None
    seed: str | None = None

    def workload_run(self) -> WorkloadRun:
        """Only the flags given are passed: the workload owns the defaults."""
        flags = {
            "--policy": self.policy,
            "--deadline": self.deadline,
            "--alpha": self.alpha,
            "--workers": self.workers,
            "--rates": self.rates,
            "--zone": self.zone,
            "--product": self.product,
            "--on-demand-price": self.on_demand_price,
            "--preemption": self.preemption,
            "--seed": self.seed,
        }
        args = [
            part
            for flag, value in flags.items()
            if value is not None
            for part in (flag, str(value))
        ]
        inputs = {"--trace": self.trace} if self.trace is not None else {}
        return WorkloadRun("doll", "workloads.doll", tuple(args), inputs)


def run_doll(
    options: DollOptions,
    address: str | None = None,
    stack: str | None = None,
    out: Path | None = None,
    show: Callable[[str], None] = print,
) -> Path:
    """Check the flags and trace here, run DOLL on the target, then draw its figures;
    returns the local results folder."""
    run = options.workload_run()
    trace_flag = [part for flag, path in run.inputs.items() for part in (flag, str(path))]
    config = from_args([*run.args, *trace_flag])
    load_trace(config.trace, config.zone, config.product)
    folder = run_workload(run, address, stack, out, show)
    draw(folder)
    return folder
