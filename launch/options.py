"""The launcher's own flags (where a run goes, the local lab's shape), declared once in the
same way as a workload's options (workloads/common/options.py); `tasks.py` makes each run
task's flags from these specs and the workload's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spotlab.options import lab_spec
from workloads.common.options import OptionError, OptionSpec, check_fields, option

BW_HELP = (
    "cross-site bandwidth in Mbit/s: 30/50/80/100/150/200 pick the seed profile "
    "(31/55/83/106/160/210), any other positive number shapes to exactly that"
)


@dataclass(frozen=True, kw_only=True)
class StackTarget:
    stack: str | None = option(
        None,
        "run on this Pulumi stack's deployed cluster instead (results come back through its "
        "bucket)",
    )
    out: Path | None = option(
        None, "local results folder (not set: a new folder under results/<workload>/)"
    )

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class TargetOptions(StackTarget):
    """Where a Ray workload runs: here (the default), `--address`, or `--stack`."""

    address: str | None = option(
        None,
        "Ray dashboard address of any cluster, e.g. http://HOST:8265 (runs as a Ray Job)",
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.address and self.stack:
            raise OptionError("--address", "give --address or --stack, not both")


@dataclass(frozen=True, kw_only=True)
class BurstLabOptions:
    """The local two-site lab a burst run brings up (ignored with --stack)."""

    cloud_nodes: int = option(1, "local lab: number of cloud Ray nodes", minimum=1, maximum=8)
    hpc_cpus: int = option(2, "local lab: CPUs of the HPC worker node", minimum=1)
    cloud_cpus: int = option(2, "local lab: CPUs of each cloud node", minimum=1)

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class BurstRunTarget(StackTarget):
    bw: float = option(30.0, BW_HELP, above=0.0)


@dataclass(frozen=True, kw_only=True)
class BurstSweepTarget(StackTarget):
    bw: tuple[float, ...] = option(
        (30.0, 50.0, 100.0, 150.0, 200.0),
        "comma-separated cross-site bandwidths in Mbit/s, one run each",
        above=0.0,
    )


TARGET_SPEC = OptionSpec(TargetOptions)
BURST_LAB_SPEC = OptionSpec(BurstLabOptions)
BURST_RUN_SPEC = OptionSpec(BurstRunTarget)
BURST_SWEEP_SPEC = OptionSpec(BurstSweepTarget)


# A chain step every 0.5 s (not the lab's 0.1 s) preempts a spot node about every 70 s: a
# worker-group restart takes 30-80 s on a loaded 2-core machine, and at 0.1 s the run spent
# its time restarting (measured; README, "Elastic training on spot").
ELASTIC_LAB_REFRESH_S = 0.5
ELASTIC_LAB_SPEC = lab_spec("ElasticLabOptions", refresh=ELASTIC_LAB_REFRESH_S)
