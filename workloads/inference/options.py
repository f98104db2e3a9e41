"""The inference cluster's option specs: the service (`invoke infer-up`), a job
(`invoke job-add`) and the experiment (`invoke run-inference`, `python -m
workloads.inference`). Flags avoid the spot lab's and the target's names.

Also the ONE check of a command to the coordinator (`parse_command`): the CLI runs it before
sending, and the coordinator runs it on every command it receives, over HTTP or as a Ray
call, so the service accepts exactly what the CLI accepts. Names of jobs and of files in the
store are short plain words (they become file names in the store), and the limits below
bound what one command can make the service hold."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from vocab.names import NAME, shown
from workloads.common.options import OptionError, OptionSpec, check_fields, option
from workloads.common.results import ResultsOptions
from workloads.inference.scheduler import POLICIES

MAX_BATCH_SIZE = 100_000
MAX_SUB_JOBS = 100_000
"""Sub-jobs of one job (its test set's rows / --batch-size)."""
MAX_JOBS = 32
"""Jobs the service holds at once (job-remove makes room)."""
MAX_FILE_BYTES = 512 * 1024 * 1024
"""A model, test set or labels file: what one node holds in memory beside others."""
HELD_OUT_DIGITS = 450
"""Queries in the demo's test set before it is repeated (a quarter of scikit-learn's digits)."""
COMMANDS = ("job_add", "job_start", "job_stop", "job_remove", "job_status", "members")


def check_name(flag: str, value: Any) -> str:
    """A job's or a stored file's name: 1-64 letters, digits, '.', '_', '-', not starting
    with '.' or '-' (so it is one plain file name in the store)."""
    if not NAME.matches(value):
        raise OptionError(flag, f"expected {NAME.rule}, got {shown(value)}")
    return value


def check_store(flag: str, store: str | None, endpoint: str | None) -> None:
    """A store is a folder or s3://BUCKET[/prefix]; an endpoint goes with s3:// only."""
    if store is not None:
        parsed = urlparse(store)
        if parsed.scheme in ("", "file") and Path(parsed.path or store).is_file():
            raise OptionError(flag, f"{store} is a file; give a folder or s3://BUCKET/PREFIX")
        if not store.strip():
            raise OptionError(flag, "expected a folder or s3://BUCKET/PREFIX, got ''")
        if parsed.scheme == "s3" and not parsed.netloc:
            raise OptionError(flag, f"expected s3://BUCKET/PREFIX, got {store!r} (no bucket)")
        if parsed.scheme not in ("", "s3", "file"):
            raise OptionError(flag, f"expected a folder or s3://BUCKET/PREFIX, got {store!r}")
    if endpoint is not None:
        if store is None or urlparse(store).scheme != "s3":
            raise OptionError(f"{flag}-endpoint", "only with an s3:// store")
        if urlparse(endpoint).scheme not in ("http", "https") or not urlparse(endpoint).netloc:
            raise OptionError(f"{flag}-endpoint", f"expected http(s)://HOST:PORT, got "
                              f"{endpoint!r}")


@dataclass(frozen=True, kw_only=True)
class ServiceOptions:
    workers: int = option(3, "worker actors kept on the spot nodes (one CPU each)", minimum=1,
                          maximum=64)
    policy: str = option("fair", "fair: fair share of query rates; fcfs: first job first",
                         choices=POLICIES)
    rebalance_s: float = option(5.0, "seconds between fair-share rebalances (workers moved "
                                "between jobs)", flag="--fair-share-period", minimum=0.1,
                                maximum=3600.0)
    window_s: float = option(30.0, "seconds of the query-rate window", flag="--window",
                             minimum=1.0, maximum=86400.0)
    subjob_timeout_s: float = option(60.0, "a sub-job running longer is re-run elsewhere "
                                     "and its worker killed", flag="--subjob-timeout",
                                     minimum=1.0, maximum=86400.0)
    store: str | None = option(None, "file store that every node reaches: a folder "
                               "shared by the nodes or s3://bucket/prefix (not set: a folder "
                               "under results/inference/ on the local lab, the stack's "
                               "bucket on --stack)", path="folder")
    store_endpoint: str | None = option(None, "S3 endpoint URL of the store (a local S3)")
    worker_memory_mb: int = option(2048, "each worker's memory limit (MiB), enforced: three "
                                   "quarters for the process ONNX Runtime runs its models in, "
                                   "a quarter for the test sets it keeps; a sub-job past it "
                                   "fails its job, naming memory and the batch size",
                                   flag="--worker-memory-mb", minimum=512, maximum=65536)

    def __post_init__(self) -> None:
        check_fields(self)
        check_store("--store", self.store, self.store_endpoint)
        if self.rebalance_s > self.window_s:
            raise OptionError("--fair-share-period", f"expected at most --window "
                              f"({self.window_s:g}), got {self.rebalance_s:g}")

    def settings(self, store: str) -> dict[str, Any]:
        """The coordinator's settings (workloads.inference.coordinator.ServiceSettings)."""
        return {"store": store, "s3_endpoint": self.store_endpoint, "workers": self.workers,
                "policy": self.policy, "rebalance_s": self.rebalance_s,
                "window_s": self.window_s, "subjob_timeout_s": self.subjob_timeout_s,
                "worker_memory_mb": self.worker_memory_mb}


RENAMED = {"--rebalance": "--fair-share-period"}
"""`--rebalance` was the fair-share period, beside the spot lab's `--rebalance-chance`."""
SERVICE_SPEC = OptionSpec(ServiceOptions, prog="invoke infer-up",
                          description="Bring the inference service up.", renamed=RENAMED)


@dataclass(frozen=True, kw_only=True)
class JobOptions:
    model: str | None = option(None, "model file name in the store: an ONNX model "
                               "(required; docs/inference.md)")
    testset: str | None = option(None, "test set file name in the store: an .npy array, "
                                 "one query per row of the model's input shape (required)")
    labels: str | None = option(None, "labels file name in the store: a 1-D integer .npy "
                                "array, one label per query (required)")
    batch_size: int = option(20, "queries per sub-job", minimum=1, maximum=MAX_BATCH_SIZE)

    def __post_init__(self) -> None:
        check_fields(self)
        for flag, value in (("--model", self.model), ("--testset", self.testset),
                            ("--labels", self.labels)):
            if value is not None:
                check_name(flag, value)

    def files(self) -> tuple[str, str, str]:
        """Model, test set and labels; OptionError naming the first one not given."""
        for name in ("model", "testset", "labels"):
            if not getattr(self, name):
                raise OptionError(f"--{name}", "required: a file name in the store (files-ls)")
        assert self.model and self.testset and self.labels
        return self.model, self.testset, self.labels


JOB_SPEC = OptionSpec(JobOptions, prog="invoke job-add NAME", description="Add a job.")


@dataclass(frozen=True, kw_only=True)
class DemoOptions:
    dir: str | None = option(None, "local folder to write the files into (required)",
                             path="folder")
    repeat: int = option(1, f"the held-out digits ({HELD_OUT_DIGITS}) repeated this often in "
                         "the test set",
                         minimum=1, maximum=10_000)

    def __post_init__(self) -> None:
        check_fields(self)

    def folder(self) -> Path:
        """The folder (check_fields saw it is no file); OptionError when --dir is not given."""
        if not self.dir:
            raise OptionError("--dir", "required: the local folder to write the files into")
        return Path(self.dir)


DEMO_SPEC = OptionSpec(DemoOptions, prog="invoke files-demo",
                       description="Write the demo's files.")


@dataclass(frozen=True)
class Command:
    """A checked command: its method, the job it names (if any) and, for job_add, the job."""

    method: str
    name: str | None = None
    job: JobOptions | None = None

    def args(self) -> list[Any]:
        """The arguments as sent (parse_command gives this command back from them)."""
        if self.job is not None:
            return [self.name, *self.job.files(), self.job.batch_size]
        return [] if self.name is None else [self.name]


def parse_command(method: Any, args: Sequence[Any]) -> Command:
    """`method(*args)` checked as the CLI checks it (OptionError naming the argument):
    job_add NAME MODEL TESTSET LABELS BATCH_SIZE; job_start / job_stop / job_remove NAME;
    job_status [NAME]; members. Values must have their exact JSON type (an integer is not
    1.5, true or a text)."""
    if not isinstance(method, str) or method not in COMMANDS:
        shown = repr(method)[:60]
        raise OptionError("method", f"expected one of {', '.join(COMMANDS)}, got {shown}")
    arity = {"job_add": (5,), "job_status": (0, 1), "members": (0,)}.get(method, (1,))
    if len(args) not in arity:
        raise OptionError(method, f"takes {' or '.join(map(str, arity))} arguments, "
                          f"got {len(args)}")
    if method == "members" or not args:
        return Command(method)
    name = check_name("NAME", args[0])
    if method != "job_add":
        return Command(method, name)
    model, testset, labels, batch_size = args[1:]
    job = JobOptions(model=model, testset=testset, labels=labels, batch_size=batch_size)
    job.files()
    return Command(method, name, job)


@dataclass(frozen=True, kw_only=True)
class InferenceOptions(ServiceOptions, ResultsOptions):
    """The service's flags, and the experiment's (a shorter window and rebalance than the
    service's, so that a run of a minute shows fair share before and after the failures)."""

    rebalance_s: float = option(1.0, "seconds between fair-share rebalances (workers moved "
                                "between jobs)", flag="--fair-share-period", minimum=0.1,
                                maximum=3600.0)
    window_s: float = option(5.0, "seconds of the query-rate window", flag="--window",
                             minimum=1.0, maximum=86400.0)
    jobs: int = option(2, "jobs run at once: the small network and the convolutional one "
                       "(large); with 3, also the medium network; with more, copies of the "
                       "three in turn", minimum=2, maximum=MAX_JOBS)
    batch_size: int = option(100, "queries per sub-job", minimum=1, maximum=MAX_BATCH_SIZE)
    repeat: int = option(450, f"the held-out digits ({HELD_OUT_DIGITS}) repeated this often "
                         "per test set",
                         minimum=1, maximum=10_000)
    fail_workers: int = option(2, "busy workers killed at the same moment during the run, "
                               "each in the middle of a sub-job (0: none)", minimum=0,
                               maximum=64)
    fail_coordinator: int = option(1, "1: kill the coordinator at the same moment as the "
                                   "workers (Ray restarts it, it resumes from the store); "
                                   "0: not", minimum=0, maximum=1)
    fail_after_s: float = option(8.0, "seconds after the jobs start that the failures hit",
                                 flag="--fail-after", minimum=0.0)
    seed: int = option(0, "seed of the models' training and the data split", minimum=0)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.fail_workers > self.workers:
            raise OptionError("--fail-workers", f"expected at most --workers ({self.workers}), "
                              f"got {self.fail_workers}")
        sub_jobs = -(-HELD_OUT_DIGITS * self.repeat // self.batch_size)
        if sub_jobs > MAX_SUB_JOBS:
            raise OptionError("--batch-size", f"{HELD_OUT_DIGITS * self.repeat} queries per "
                              f"job (--repeat {self.repeat}) in batches of {self.batch_size} "
                              f"make {sub_jobs} sub-jobs, more than {MAX_SUB_JOBS}")

    def parameters(self) -> dict[str, Any]:
        return asdict(self)


INFERENCE_SPEC = OptionSpec(
    InferenceOptions, prog="python -m workloads.inference",
    description="The inference cluster experiment: the service up on this Ray cluster, "
    "models and test sets into its store, jobs of different cost with fair share, optional "
    "failures; writes summary.json, provenance.json and records/.", renamed=RENAMED)
