"""The experiment's parameters, their command-line flags, and their validation."""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workloads.doll.trace import DEFAULT_TRACE

POLICIES = ("on-demand", "static", "adaptive")
PREEMPTION_MODES = ("markov", "kill")
RATE_MODES = ("homogeneous", "heterogeneous")


@dataclass(frozen=True)
class DollConfig:
    policies: tuple[str, ...] = POLICIES
    workers: int = 16
    deadline_factor: float = 1.05
    alpha: float = 0.9
    rate: float = 80.0
    rates: str = "homogeneous"
    batch_size: int = 32
    batches: int = 2000
    k: int = 4
    learning_rate: float = 0.5
    hidden: int = 32
    trace: Path = DEFAULT_TRACE
    zone: str = "ca-central-1b"
    product: str = "SUSE Linux"
    on_demand_price: float = 0.286
    compression: float = 2000.0
    refresh_s: float = 0.04
    adapt_interval_s: float = 1.0
    eval_every: int = 25
    preemption: str = "markov"
    seed: int = 0
    out: str | None = None
    s3_endpoint: str | None = None
    results_to_log: bool = False
    target: str = "local"

    def __post_init__(self) -> None:
        problems = [
            f"--policy {name!r} is not one of {', '.join(POLICIES)}"
            for name in self.policies
            if name not in POLICIES
        ]
        if not self.policies:
            problems.append("--policy names no policy")
        if len(set(self.policies)) != len(self.policies):
            problems.append(f"--policy repeats a policy: {', '.join(self.policies)}")
        positive = {
            "--workers": self.workers,
            "--rate": self.rate,
            "--batch-size": self.batch_size,
            "--batches": self.batches,
            "--k": self.k,
            "--learning-rate": self.learning_rate,
            "--hidden": self.hidden,
            "--on-demand-price": self.on_demand_price,
            "--compression": self.compression,
            "--refresh": self.refresh_s,
            "--adapt-interval": self.adapt_interval_s,
            "--eval-every": self.eval_every,
        }
        problems += [
            f"{flag} must be positive, got {value}"
            for flag, value in positive.items()
            if not value > 0
        ]
        if not self.deadline_factor >= 1.0:
            problems.append(f"--deadline (θ/θ₀) must be at least 1, got {self.deadline_factor}")
        if not 0.0 < self.alpha <= 1.0:
            problems.append(f"--alpha must be in (0, 1], got {self.alpha}")
        if self.k > self.workers:
            problems.append(f"--k {self.k} is more than --workers {self.workers}")
        if self.preemption not in PREEMPTION_MODES:
            problems.append(f"--preemption {self.preemption!r} is not one of {PREEMPTION_MODES}")
        if self.rates not in RATE_MODES:
            problems.append(f"--rates {self.rates!r} is not one of {RATE_MODES}")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def work_points(self) -> float:
        """J·B: the points to process."""
        return float(self.batches * self.batch_size)

    def worker_rates(self) -> list[float]:
        """λᵢ per worker: all λ, or λ·U[0.5, 1.5] rescaled so their mean is λ."""
        if self.rates == "homogeneous":
            return [self.rate] * self.workers
        draws = np.random.default_rng([self.seed, 104729]).uniform(0.5, 1.5, self.workers)
        return [float(r) for r in draws * self.rate / draws.mean()]

    def parameters(self) -> dict[str, Any]:
        document = asdict(self)
        document["trace"] = str(self.trace)
        document["policies"] = list(self.policies)
        return document


def parser() -> argparse.ArgumentParser:
    d = DollConfig()
    p = argparse.ArgumentParser(
        prog="python -m workloads.doll",
        description="DOLL on Ray: K-batch SGD on streaming workers, spot price replay, "
        "allocation policies; writes summary.json, provenance.json and records/.",
    )
    add = p.add_argument
    add(
        "--policy",
        default=",".join(d.policies),
        help=f"comma-separated policies among {', '.join(POLICIES)} (default: all)",
    )
    add("--workers", type=int, default=d.workers, help="N, the number of stream workers")
    add("--deadline", type=float, default=d.deadline_factor, help="deadline θ/θ₀")
    add("--alpha", type=float, default=d.alpha, help="spot availability α of the Markov chain")
    add("--rate", type=float, default=d.rate, help="λ, points/s arriving at each worker")
    add(
        "--rates",
        choices=RATE_MODES,
        default=d.rates,
        help="homogeneous (all λ) or heterogeneous (λ·U[0.5, 1.5], rescaled to mean λ)",
    )
    add("--batch-size", type=int, default=d.batch_size, help="B, points per batch")
    add("--batches", type=int, default=d.batches, help="J, batches to process")
    add("--k", type=int, default=d.k, help="K, batches per synchronous SGD update")
    add("--learning-rate", type=float, default=d.learning_rate, help="SGD step size")
    add("--hidden", type=int, default=d.hidden, help="hidden units of the model")
    add(
        "--trace",
        type=Path,
        default=d.trace,
        help="AWS describe-spot-price-history JSON (default: the shipped 2021 trace)",
    )
    add("--zone", default=d.zone, help="availability zone selected from the trace")
    add("--product", default=d.product, help="ProductDescription selected from the trace")
    add("--on-demand-price", type=float, default=d.on_demand_price, help="p_od in $/h")
    add(
        "--compression",
        type=float,
        default=d.compression,
        help="trace seconds replayed per wall-clock second (the trace loops)",
    )
    add(
        "--refresh",
        type=float,
        default=d.refresh_s,
        help="seconds per preemption-chain step (the paper's 2 s refresh, compressed)",
    )
    add(
        "--adapt-interval",
        type=float,
        default=d.adapt_interval_s,
        help="seconds between re-estimations of the adaptive policy (also at price changes)",
    )
    add("--eval-every", type=int, default=d.eval_every, help="updates between test evaluations")
    add(
        "--preemption",
        choices=PREEMPTION_MODES,
        default=d.preemption,
        help="markov: the worker stops receiving data; kill: the actor is killed and a "
        "fresh one takes over on recovery",
    )
    add("--seed", type=int, default=d.seed, help="seed of preemptions, streams and weights")
    add(
        "--out",
        default=None,
        help="results folder or s3://bucket/prefix (default: results/doll/<timestamp>)",
    )
    add("--s3-endpoint", default=None, help="S3 endpoint URL for --out s3://... (local S3)")
    add(
        "--results-to-log",
        action="store_true",
        help="also print the results as one line of the log (for a launcher without a bucket)",
    )
    add("--target", default=d.target, help="where this runs, as recorded in summary.json")
    return p


def from_args(argv: list[str] | None = None) -> DollConfig:
    args = parser().parse_args(argv)
    return DollConfig(
        policies=tuple(name.strip() for name in args.policy.split(",") if name.strip()),
        workers=args.workers,
        deadline_factor=args.deadline,
        alpha=args.alpha,
        rate=args.rate,
        rates=args.rates,
        batch_size=args.batch_size,
        batches=args.batches,
        k=args.k,
        learning_rate=args.learning_rate,
        hidden=args.hidden,
        trace=args.trace,
        zone=args.zone,
        product=args.product,
        on_demand_price=args.on_demand_price,
        compression=args.compression,
        refresh_s=args.refresh,
        adapt_interval_s=args.adapt_interval,
        eval_every=args.eval_every,
        preemption=args.preemption,
        seed=args.seed,
        out=args.out,
        s3_endpoint=args.s3_endpoint,
        results_to_log=args.results_to_log,
        target=args.target,
    )
