"""The DOLL workload's options: the one spec its argparse, `invoke run-doll` and the
launcher's command line are made from (see workloads/common/options.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workloads.common.options import OptionError, OptionSpec, check_fields, option
from workloads.common.results import ResultsOptions
from workloads.common.spot_market.trace import DEFAULT_TRACE

POLICIES = ("on-demand", "static", "adaptive", "static-paper", "adaptive-paper", "fallback",
            "uniform-progress")
DEFAULT_POLICIES = ("on-demand", "static", "adaptive")
PAPER_REFRESH_S = 2.0  # the paper's preemption-chain step, in real seconds
PREEMPTION_MODES = ("markov", "kill")
RATE_MODES = ("homogeneous", "heterogeneous")

MAX_WORKERS = 256
"""More stream workers than a 256-node cluster runs one each of is no experiment of DOLL's."""


@dataclass(frozen=True, kw_only=True)
class DollOptions(ResultsOptions):
    policies: tuple[str, ...] = option(
        DEFAULT_POLICIES,
        "comma-separated policies to run, in order: " + ", ".join(POLICIES) + ", or your "
        "own as FILE.py:Class (see docs/doll.md). static/adaptive meet the deadline with "
        "--deadline-probability; static-paper/adaptive-paper are the paper's formulas; "
        "fallback (extension) runs all on spot with on-demand stand-ins during outages; "
        "uniform-progress is Can't Be Late's baseline",
        flag="--policy",
    )
    workers: int = option(16, "N, the number of stream workers (Ray actors)", minimum=1,
                         maximum=MAX_WORKERS)
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
        "its restart overhead d (compressed like the chain's 2 s refresh)",
        flag="--launch-delay",
        minimum=0.0,
    )
    batch_size: int = option(32, "B, points per batch", minimum=1, maximum=65_536)
    batches: int = option(2000, "J, batches to process", minimum=1, maximum=1_000_000)
    k: int = option(4, "K, batches per synchronous SGD update (at most N)", minimum=1)
    learning_rate: float = option(0.5, "SGD step size", above=0.0)
    hidden: int = option(32, "hidden units of the model", minimum=1, maximum=4096)
    trace: Path = option(
        DEFAULT_TRACE,
        "AWS describe-spot-price-history JSON (the shipped file is the 2021 c5.xlarge trace)",
    )
    zone: str = option("ca-central-1b", "availability zone selected from the trace")
    product: str = option("SUSE Linux", "ProductDescription selected from the trace")
    on_demand_price: float = option(0.286, "on-demand price p_od in $/h", above=0.0)
    compression: float = option(
        2000.0, "trace seconds replayed per wall-clock second (the trace loops)", above=0.0,
        maximum=1e7,
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
        "adaptive re-estimates at this interval; a decide that takes longer fails its policy",
        flag="--adapt-interval",
        above=0.0,
    )
    eval_every: int = option(25, "updates between test evaluations", minimum=1)
    capacity_trace: Path | None = option(
        None,
        "spot capacity trace (JSON {\"metadata\": {\"gap_seconds\": N}, \"data\": [count, "
        "...]}, the public spot-traces format): at most data[i] spot instances exist from "
        "i·gap_seconds on, replayed with --compression trace seconds per wall-clock second "
        "like the price trace, looping, from a tick drawn from --seed (seed 0: the first); "
        "it replaces the preemption chain",
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
    seed: int = option(0, "seed of preemptions, streams and weights", minimum=0)

    def __post_init__(self) -> None:
        check_fields(self)
        self._check_policies()
        if self.k > self.workers:
            raise OptionError("--k", f"expected at most --workers ({self.workers}), got {self.k}")
        if "fallback" in self.policies and self.preemption == "kill":
            raise OptionError(
                "--policy",
                "fallback keeps the preempted worker's stream and needs --preemption markov",
            )

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
        """The stand-in's launch delay on this run's clock."""
        return self.launch_delay_s * self.refresh_s / PAPER_REFRESH_S

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
        document = asdict(self)
        document["trace"] = str(self.trace)
        document["policies"] = list(self.policies)
        if not {"fallback", "uniform-progress"} & set(self.policies):
            del document["launch_delay_s"]  # stand-ins' launch, uniform-progress's d
        document["capacity_trace"] = None if self.capacity_trace is None \
            else str(self.capacity_trace)
        document["policy_file"] = None if self.policy_file is None else str(self.policy_file)
        return document


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
