"""The inference cluster's option specs: the service (`invoke infer-up`), a job
(`invoke job-add`) and the experiment (`invoke run-inference`, `python -m
workloads.inference`). Flags avoid the spot lab's and the target's names."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from workloads.common.options import OptionError, OptionSpec, check_fields, option
from workloads.common.results import ResultsOptions
from workloads.inference.scheduler import POLICIES


@dataclass(frozen=True, kw_only=True)
class ServiceOptions:
    workers: int = option(3, "worker actors kept on the spot nodes (one CPU each)", minimum=1,
                          maximum=64)
    policy: str = option("fair", "fair: fair share of query rates; fcfs: first job first",
                         choices=POLICIES)
    rebalance_s: float = option(5.0, "seconds between fair-share rebalances",
                                flag="--rebalance", above=0.0)
    window_s: float = option(30.0, "seconds of the query-rate window", flag="--window",
                             above=0.0)
    subjob_timeout_s: float = option(60.0, "a sub-job running longer is re-run elsewhere "
                                     "and its worker killed", flag="--subjob-timeout",
                                     above=0.0)
    store: str | None = option(None, "file store: a folder or s3://bucket/prefix (not set: "
                               "results/inference/store-<timestamp>)")
    store_endpoint: str | None = option(None, "S3 endpoint URL of the store (a local S3)")

    def __post_init__(self) -> None:
        check_fields(self)
        if self.rebalance_s > self.window_s:
            raise OptionError("--rebalance", f"expected at most --window ({self.window_s:g}), "
                              f"got {self.rebalance_s:g}")

    def settings(self, store: str) -> dict[str, Any]:
        """The coordinator's settings (workloads.inference.coordinator.ServiceSettings)."""
        return {"store": store, "s3_endpoint": self.store_endpoint, "workers": self.workers,
                "policy": self.policy, "rebalance_s": self.rebalance_s,
                "window_s": self.window_s, "subjob_timeout_s": self.subjob_timeout_s}


SERVICE_SPEC = OptionSpec(ServiceOptions, prog="invoke infer-up",
                          description="Bring the inference service up.")


@dataclass(frozen=True, kw_only=True)
class JobOptions:
    model: str | None = option(None, "model file name in the store (required)")
    testset: str | None = option(None, "test set file name in the store: a .npy array, one "
                                 "row a query (required)")
    labels: str | None = option(None, "labels file name in the store: a .npy array "
                                "(required)")
    batch_size: int = option(20, "queries per sub-job", minimum=1)

    def __post_init__(self) -> None:
        check_fields(self)

    def files(self) -> tuple[str, str, str]:
        """Model, test set and labels; OptionError naming the first one not given."""
        for name in ("model", "testset", "labels"):
            if not getattr(self, name):
                raise OptionError(f"--{name}", "required: a file name in the store (files-ls)")
        assert self.model and self.testset and self.labels
        return self.model, self.testset, self.labels


JOB_SPEC = OptionSpec(JobOptions, prog="invoke job-add NAME", description="Add a job.")


@dataclass(frozen=True, kw_only=True)
class InferenceOptions(ServiceOptions, ResultsOptions):
    """The service's flags, and the experiment's."""

    jobs: int = option(2, "jobs run at once: the small and large networks (with 3, also "
                       "the medium one)", minimum=2, maximum=3)
    batch_size: int = option(20, "queries per sub-job", minimum=1)
    repeat: int = option(20, "the held-out digits (450) repeated this often per test set",
                         minimum=1)
    fail_workers: int = option(0, "workers killed at the same moment during the run",
                               minimum=0)
    fail_coordinator: bool = option(False, "kill the coordinator during the run")
    fail_after_s: float = option(20.0, "seconds after the jobs start that the failures hit",
                                 flag="--fail-after", minimum=0.0)
    seed: int = option(0, "seed of the models' training and the data split", minimum=0)

    def parameters(self) -> dict[str, Any]:
        return asdict(self)


INFERENCE_SPEC = OptionSpec(
    InferenceOptions, prog="python -m workloads.inference",
    description="The inference cluster experiment: the service up on this Ray cluster, "
    "models and test sets into its store, jobs of different cost with fair share, optional "
    "failures; writes summary.json, provenance.json and records/.")
