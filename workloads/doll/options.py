"""The DOLL workload's options: the one spec its argparse, `invoke run-doll` and the
launcher's command line are made from (see workloads/common/options.py), and the simulator's
(`invoke sim-doll`), which shares every option of the job, the policies and the spot market
(`DollJob`) with the lab."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from vocab.spot import SPOT_WARNING_S
from workloads.common.options import OptionError, OptionSpec, check_fields, option
from workloads.common.results import ResultsOptions
from workloads.common.spot_market.trace import DEFAULT_TRACE

POLICIES = ("on-demand", "static", "adaptive", "static-paper", "adaptive-paper", "fallback",
            "uniform-progress")
DEFAULT_POLICIES = ("on-demand", "static", "adaptive")
DEFAULT_COMPRESSION = 2000.0
"""Trace seconds per second of the run: the paper's authors divide durations by 2000."""
PREEMPTION_MODES = ("markov", "kill")
RATE_MODES = ("homogeneous", "heterogeneous")

MAX_WORKERS = 256
"""More stream workers than a 256-node cluster runs one each of is no experiment of DOLL's."""
MAX_SIM_WORKERS = 4096
"""The simulator's fleets: no actor per worker, so far larger ones than the lab's."""
RULES = ("doll", "cant-be-late")
CAPACITY_READINGS = ("count", "unavailable")
ARRIVALS = ("even", "exponential")


@dataclass(frozen=True, kw_only=True)
class DollJob:
    """What the lab and the simulator share: the job, the policies, the spot market and the
    rules the one engine (engine.py) follows."""

    policies: tuple[str, ...] = option(
        DEFAULT_POLICIES,
        "comma-separated policies to run, in order: " + ", ".join(POLICIES) + ", or your "
        "own as FILE.py:Class (see docs/doll.md). static/adaptive meet the deadline with "
        "--deadline-probability; static-paper/adaptive-paper are the paper's formulas; "
        "fallback (extension) runs all on spot with on-demand stand-ins during outages; "
        "uniform-progress is Can't Be Late's baseline",
        flag="--policy",
    )
    workers: int = option(16, "N, the number of stream workers", minimum=1,
                         maximum=MAX_SIM_WORKERS)
    deadline_factor: float = option(1.05, "deadline θ/θ₀", flag="--deadline", minimum=1.0)
    alpha: float = option(
        0.9, "spot availability α of the preemption chain", above=0.0, maximum=1.0
    )
    rate: float = option(80.0, "λ, points/s arriving at each worker", above=0.0,
                         maximum=1e6)
    rates: str = option(
        "homogeneous",
        "homogeneous (all λ) or heterogeneous (λ·U[0.5, 1.5], rescaled to mean λ)",
        choices=RATE_MODES,
    )
    deadline_probability: float = option(
        0.9,
        "static/adaptive: the probability of meeting the deadline their spot share keeps "
        "under the preemption model",
        above=0.0,
        maximum=1.0,
    )
    launch_delay_s: float = option(
        90.0,
        "fallback: real seconds an on-demand stand-in takes to launch; uniform-progress: "
        "its restart overhead d; under --rules cant-be-late every launch's overhead "
        "(trace seconds: compressed by --compression like the traces)",
        flag="--launch-delay",
        minimum=0.0,
    )
    warning_s: float | None = option(
        SPOT_WARNING_S,
        "real seconds between a spot instance's interruption notice and its loss (AWS's "
        "two minutes; compressed by --compression; a policy sees it in state.notice_s), or "
        "none: the notice comes with the loss (always so under --rules cant-be-late)",
        flag="--warning",
        aliases={"none": None},
        minimum=1.0,
        maximum=3600.0,
    )
    batch_size: int = option(32, "B, points per batch", minimum=1, maximum=65_536)
    batches: int = option(2000, "J, batches to process", minimum=1, maximum=1_000_000)
    k: int = option(4, "K, batches per synchronous SGD update (at most N)", minimum=1)
    trace: Path = option(
        DEFAULT_TRACE,
        "AWS describe-spot-price-history JSON (the shipped file is the 2021 c5.xlarge trace)",
    )
    zone: str = option("ca-central-1b", "availability zone selected from the trace")
    product: str = option("SUSE Linux", "ProductDescription selected from the trace")
    on_demand_price: float = option(0.286, "on-demand price p_od in $/h", above=0.0)
    spot_price: float | None = option(
        None, "a fixed spot price in $/h instead of the --trace prices (for capacity traces "
        "without prices)", above=0.0,
    )
    compression: float = option(
        DEFAULT_COMPRESSION, "trace seconds replayed per wall-clock second (the trace loops)",
        above=0.0, maximum=1e7,
    )
    refresh_s: float = option(
        0.04,
        "seconds per preemption-chain step (the paper's 2 s refresh, compressed)",
        flag="--refresh",
        minimum=0.001,
        maximum=3600.0,
    )
    adapt_interval_s: float = option(
        1.0,
        "seconds between policy decisions (also at price, spot and capacity changes): "
        "adaptive re-estimates at this interval; in the lab, a decide that takes longer fails "
        "its policy",
        flag="--adapt-interval",
        above=0.0,
    )
    capacity_reading: str = option(
        "count",
        "what a capacity trace's values mean: count (spot instances available, as the "
        "spot-traces README says) or unavailable (1 = no spot instance, 0 = one: how Can't Be "
        "Late's simulator reads its 1-node availability traces); see docs/doll.md",
        choices=CAPACITY_READINGS,
    )
    rules: str = option(
        "doll",
        "doll, or cant-be-late: Can't Be Late's simulator's rules (every launch, the first "
        "included, costs --launch-delay billed without progress; one decision per trace "
        "tick; the run ends with its capacity trace instead of looping; no notices)",
        choices=RULES,
    )
    seed: int = option(0, "seed of preemptions, streams and weights", minimum=0)

    def __post_init__(self) -> None:
        check_fields(self)
        self._check_policies()
        if self.k > self.workers:
            raise OptionError("--k", f"expected at most --workers ({self.workers}), got {self.k}")

    def _check_policies(self) -> None:
        names: list[str] = []
        files: set[Path] = set()
        for entry in self.policies:
            if entry in POLICIES:
                names.append(entry)
                continue
            path, class_name = user_policy_parts(entry)
            names.append(class_name)
            files.add(path)
        if len(set(names)) != len(names):
            raise OptionError("--policy", f"two policies go by one name: {', '.join(names)}")
        if len(files) > 1:
            raise OptionError("--policy", "user policies come from one file per run, got "
                              + ", ".join(sorted(map(str, files))))

    def user_policy_file(self) -> Path | None:
        """The FILE.py of the FILE.py:Class entries (one file per run), if any."""
        for entry in self.policies:
            if entry not in POLICIES:
                return user_policy_parts(entry)[0]
        return None

    @property
    def launch_delay_compressed_s(self) -> float:
        """The launch delay (restart overhead) on the run's clock: trace seconds, compressed
        by --compression like the price and capacity traces (one clock for all three)."""
        return self.launch_delay_s / self.compression

    @property
    def warning_compressed_s(self) -> float:
        """The notice's lead time on the run's clock (none under Can't Be Late's rules)."""
        if self.cant_be_late or self.warning_s is None:
            return 0.0
        return self.warning_s / self.compression

    @property
    def cant_be_late(self) -> bool:
        return self.rules == "cant-be-late"

    @property
    def work_points(self) -> float:
        """J·B: the points to process."""
        return float(self.batches * self.batch_size)

    def worker_rates(self) -> list[float]:
        """λᵢ per worker: all λ, or λ·U[0.5, 1.5] rescaled so their mean is λ."""
        import numpy as np  # not at import: invoke reads this module for its flags

        if self.rates == "homogeneous":
            return [self.rate] * self.workers
        draws = np.random.default_rng([self.seed, 104729]).uniform(0.5, 1.5, self.workers)
        return [float(r) for r in draws * self.rate / draws.mean()]

    def parameters(self) -> dict[str, Any]:
        """Every value the run applied (none it did not), as provenance.json records them."""
        document: dict[str, Any] = {
            key: [plain(item) for item in value] if isinstance(value, tuple) else plain(value)
            for key, value in asdict(self).items()
        }
        if not self.cant_be_late and not {"fallback", "uniform-progress"} & set(self.policies):
            del document["launch_delay_s"]  # stand-ins' launch, uniform-progress's d
        if self.cant_be_late:
            del document["warning_s"]
        if self.spot_price is not None:
            del document["zone"], document["product"]
        return document


@dataclass(frozen=True, kw_only=True)
class DollOptions(DollJob, ResultsOptions):
    """The lab's run (`invoke run-doll`): the job on Ray actors, with the learning itself."""

    workers: int = option(16, "N, the number of stream workers (Ray actors)", minimum=1,
                         maximum=MAX_WORKERS)
    hidden: int = option(32, "hidden units of the model", minimum=1, maximum=4096)
    learning_rate: float = option(0.5, "SGD step size", above=0.0)
    eval_every: int = option(25, "updates between test evaluations", minimum=1)
    capacity_trace: Path | None = option(
        None,
        "spot capacity trace (JSON {\"metadata\": {\"gap_seconds\": N}, \"data\": [count, "
        "...]}, the public spot-traces format): at most data[i] spot instances exist from "
        "i·gap_seconds on, replayed with --compression trace seconds per wall-clock second "
        "like the price trace, looping, from --start; it replaces the preemption chain",
    )
    start: int | None = option(
        None,
        "the capacity trace's tick the replay starts at (not set: a tick drawn from --seed; "
        "seed 0: the first)",
        minimum=0,
    )
    policy_file: Path | None = option(
        None, "where the FILE.py of a FILE.py:Class policy is on this machine", launcher=True
    )
    preemption: str = option(
        "markov",
        "markov: the worker stops receiving data; kill: the actor is killed and a fresh one "
        "takes over on recovery",
        choices=PREEMPTION_MODES,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if "fallback" in self.policies and self.preemption == "kill":
            raise OptionError(
                "--policy",
                "fallback keeps the preempted worker's stream and needs --preemption markov",
            )
        if self.cant_be_late and self.capacity_trace is None:
            raise OptionError("--rules", "cant-be-late replays a capacity trace: give "
                                         "--capacity-trace")
        if self.start is not None and self.capacity_trace is None:
            raise OptionError("--start", "is a tick of --capacity-trace: give one")

    def parameters(self) -> dict[str, Any]:
        document = super().parameters()
        if self.capacity_trace is None:
            del document["start"], document["capacity_reading"]
        return document


def plain(value: Any) -> Any:
    """A value as JSON holds it (a path as its text)."""
    return str(value) if isinstance(value, Path) else value


def user_policy_parts(entry: str) -> tuple[Path, str]:
    """`FILE.py:Class` as (FILE.py, Class); OptionError naming --policy otherwise."""
    path, _, class_name = entry.rpartition(":")
    if not path.endswith(".py") or not class_name.isidentifier():
        raise OptionError(
            "--policy",
            f"{entry!r} is neither a built-in policy ({', '.join(POLICIES)}) nor FILE.py:Class",
        )
    return Path(path), class_name


DOLL_SPEC = OptionSpec(
    DollOptions,
    prog="python -m workloads.doll",
    description="DOLL on Ray: K-batch SGD on streaming workers, spot price replay, "
    "allocation policies; writes summary.json, provenance.json and records/.",
)


@dataclass(frozen=True, kw_only=True)
class SimOptions(DollJob):
    """The simulator's run (`invoke sim-doll`): the same job and policies replayed on the one
    engine without Ray, over several capacity traces, start points and seeds."""

    capacity_trace: tuple[Path, ...] | None = option(
        None,
        "comma-separated capacity traces, files or folders of them (*.json, every one "
        "replayed), in the format and --capacity-reading of run-doll's --capacity-trace; not "
        "set: the preemption chain",
    )
    starts: int = option(
        1, "start points spread evenly over each capacity trace (the first at its first tick)",
        minimum=1, maximum=100_000,
    )
    start: tuple[int, ...] | None = option(
        None, "comma-separated capacity trace ticks to start at (instead of --starts)",
        minimum=0,
    )
    seeds: tuple[int, ...] | None = option(
        None, "comma-separated seeds, each run at every start point (instead of --seed)",
        minimum=0,
    )
    work_hours: float | None = option(
        None,
        "the job in hours: the all-on-demand fleet's time for the work (θ₀) in trace hours; "
        "sets --compression to work-hours·3600/θ₀ (--adapt-interval keeps the trace time it "
        "has at the default --compression)",
        above=0.0, maximum=1e6,
    )
    deadline_hours: float | None = option(
        None, "the deadline in trace hours (with --work-hours): sets --deadline to "
        "deadline-hours/work-hours", above=0.0, maximum=1e6,
    )
    restart_overhead_hours: float | None = option(
        None, "the restart overhead (launch delay) in hours: sets --launch-delay", minimum=0.0,
        maximum=1e3,
    )
    arrivals: str = option(
        "even",
        "how a worker's points arrive: even (every batch takes B/λ: the stream's mean, and "
        "the fastest) or exponential (each batch the sum of B exponential gaps: the gaps "
        "run-doll's workers draw with the same --seed)",
        choices=ARRIVALS,
    )
    policy_time_s: float = option(
        10.0, "seconds a policy's decisions may take over one simulated run (more fails its "
        "row)", flag="--policy-time", above=0.0, maximum=86_400.0,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.deadline_hours is not None:
            if self.work_hours is None:
                raise OptionError("--deadline-hours", "needs --work-hours")
            if self.deadline_hours < self.work_hours:
                raise OptionError("--deadline-hours", f"expected at least --work-hours "
                                  f"({self.work_hours:g}), got {self.deadline_hours:g}")
        if self.cant_be_late and self.capacity_trace is None:
            raise OptionError("--rules", "cant-be-late replays a capacity trace: give "
                                         "--capacity-trace")
        if self.start is not None and self.capacity_trace is None:
            raise OptionError("--start", "is a tick of --capacity-trace: give one")

    def job(self, seed: int) -> SimOptions:
        """This run's options: the seed, and the job's hours turned into the engine's clock
        (compression, deadline factor, launch delay)."""
        changes: dict[str, Any] = {"seed": seed, "seeds": None, "work_hours": None,
                                   "deadline_hours": None, "restart_overhead_hours": None}
        if self.work_hours is not None:
            theta0_s = self.work_points / (self.workers * self.rate)
            changes["compression"] = self.work_hours * 3600.0 / theta0_s
            # the decision interval keeps its length in trace time
            changes["adapt_interval_s"] = \
                self.adapt_interval_s * DEFAULT_COMPRESSION / changes["compression"]
        if self.deadline_hours is not None and self.work_hours is not None:
            changes["deadline_factor"] = self.deadline_hours / self.work_hours
        if self.restart_overhead_hours is not None:
            changes["launch_delay_s"] = self.restart_overhead_hours * 3600.0
        return replace(self, **changes)

    def run_seeds(self) -> tuple[int, ...]:
        return self.seeds if self.seeds is not None else (self.seed,)


SIM_SPEC = OptionSpec(
    SimOptions,
    prog="invoke sim-doll",
    description="DOLL's policies replayed on the lab's engine without Ray: every policy over "
    "capacity traces, start points and seeds; writes runs.jsonl, summary.json, "
    "provenance.json and figures.",
)
