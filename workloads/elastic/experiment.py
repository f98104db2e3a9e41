"""The driver of an elastic run: the user's training function, data-parallel on Ray Train V2
with an elastic worker count, preemptions retried without limit, checkpoints in the run's
storage; the run's preemption schedule announced as it comes due; then the accounting of
every step from the ledger, written as results."""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import ray

from vocab.errors import UserError, one_line
from vocab.shared_data import SHARED_ENV, shared_folder
from vocab.spot import CAPACITY_SPOT, LABEL_CAPACITY
from workloads.common.provenance import package_version, provenance
from workloads.common.results import ResultsWriter
from workloads.elastic.ledger import LEDGER_NAME_PREFIX, RECORDS, start_ledger
from workloads.elastic.options import ElasticOptions
from workloads.elastic.progress import group_line, step_line
from workloads.elastic.replicas import (
    LIGHTHOUSE_KWARGS,
    QUIET_ENV,
    ReplicaController,
    ReplicaSettings,
)
from workloads.elastic.schedule import GroupView, Schedule, fire_if_due
from workloads.elastic.script import check_script, place
from workloads.elastic.summary import summarize, summarize_replicas
from workloads.elastic.worker import ReportHook, WorkerSettings, train_entry

WATCH_EVERY_S = 0.25
PROGRESS_EVERY_S = 2.0
RAY_TRAIN_ENV = {
    # the controller polls the workers (and so takes their reports and commits their
    # checkpoints) every 0.25 s, not 2 s: a notice checkpoint reaches it well before the
    # kill, and the ranks' hand-off after it starts the restart a poll later
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.25",
    # Ray Train's own drain watcher looks every second, not every 5 s
    "RAY_TRAIN_PREEMPTION_POLL_INTERVAL_S": "1",
    # a worker group whose placement waits this long will not be placed (its count was
    # chosen from the nodes alive and not draining): retry with a fresh count, not after 60 s
    "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": "30",
}
Say = Callable[[str], None]


class NoSharedFolder(UserError, RuntimeError):
    """`--checkpoint-to shared` on a Ray cluster without a shared folder."""


@contextmanager
def checkpoint_storage(options: ElasticOptions) -> Iterator[tuple[str, Any]]:
    """Where Ray Train keeps this run's checkpoints: with `--checkpoint-to shared` a new
    folder in the shared folder every node sees (kept), else next to the results in S3, else
    a local folder removed afterwards (the nodes of a local lab share this disk)."""
    if options.checkpoint_to == "shared":
        shared = shared_folder()
        if shared is None:
            raise NoSharedFolder(
                f"--checkpoint-to shared: this Ray cluster has no shared folder ({SHARED_ENV} "
                "is not set on its head: a stack with sharedStorage none, or a cluster "
                "spotburst did not start); use --checkpoint-to bucket")
        (shared / "checkpoints").mkdir(exist_ok=True)
        yield tempfile.mkdtemp(prefix="elastic-", dir=shared / "checkpoints"), None
        return
    if options.out and options.out.startswith("s3://"):
        filesystem = None
        if options.s3_endpoint:
            from pyarrow import fs

            filesystem = fs.S3FileSystem(endpoint_override=options.s3_endpoint)
        path = options.out.removeprefix("s3://").rstrip("/") + "/checkpoints"
        yield (path if filesystem else f"s3://{path}"), filesystem
        return
    folder = tempfile.mkdtemp(prefix="spotburst-elastic-")
    try:
        yield folder, None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def shipped_script(options: ElasticOptions, ledger_name: str) -> dict[str, Any]:
    """The fields of ShippedScript every worker of both modes is told."""
    return {"ledger": ledger_name, "script": place(options.script_path()),
            "working_dir": place(options.working_dir) if options.working_dir else None,
            "function": options.function, "argv": options.argv,
            "notice_poll": options.notice_poll}


def worker_settings(options: ElasticOptions, ledger_name: str) -> WorkerSettings:
    return WorkerSettings(
        **shipped_script(options, ledger_name),
        checkpoint_every=options.checkpoint_every,
        checkpoint_timeout=options.checkpoint_timeout,
        on_notice=options.on_notice,
        cluster_rescale_timeout=options.cluster_rescale_timeout,
        min_workers=options.min_workers,
        max_workers=options.max_workers,
    )


def resources_per_worker(options: ElasticOptions) -> dict[str, float]:
    return {"CPU": options.cpus, **({"GPU": options.gpus} if options.gpus else {})}


def make_trainer(options: ElasticOptions, name: str, storage: str, filesystem: Any,
                 ledger_name: str) -> Any:
    import ray.train
    from ray.train.torch import TorchConfig

    from workloads.elastic.controller import ElasticTorchTrainer, RunRecorder

    # ray.train's stubs describe the V1 configs; with Train V2 (the default) these are V2's
    train: Any = ray.train

    workers: int | tuple[int, int] = (
        options.max_workers if options.min_workers == options.max_workers
        else (options.min_workers, options.max_workers))
    return ElasticTorchTrainer(
        functools.partial(train_entry, worker_settings(options, ledger_name)),
        ledger_name=ledger_name,
        train_loop_config=options.train_loop_config,
        torch_config=TorchConfig(backend="nccl" if options.gpus else "gloo"),
        scaling_config=train.ScalingConfig(
            num_workers=workers, use_gpu=options.gpus > 0,
            resources_per_worker=resources_per_worker(options),
            elastic_resize_monitor_interval_s=options.cluster_rescale_timeout),
        run_config=train.RunConfig(
            name=name, storage_path=storage, storage_filesystem=filesystem,
            failure_config=train.FailureConfig(max_failures=options.max_failures,
                                               max_preemption_failures=-1,
                                               relax_collectives_on_preemption=True),
            checkpoint_config=train.CheckpointConfig(num_to_keep=2),
            callbacks=[RunRecorder(ledger_name), ReportHook()]),
    )


def spot_nodes() -> set[str]:
    """The alive nodes labelled spot (the spot lab's and the spot cluster's)."""
    return {node["NodeID"] for node in ray.nodes()
            if node["Alive"] and node.get("Labels", {}).get(LABEL_CAPACITY) == CAPACITY_SPOT}


class Watch:
    """The driver's view while the run goes: progress lines, and the schedule's points."""

    def __init__(self, ledger: Any, schedule: Schedule, say: Say) -> None:
        self.ledger, self.schedule, self.say = ledger, schedule, say
        self.stop = threading.Event()
        self._shown_group: int | None = None
        self._shown_step: tuple[int, int] | None = None
        self._shown_at = 0.0

    def run(self) -> None:
        while not self.stop.wait(WATCH_EVERY_S):
            try:
                progress = ray.get(self.ledger.progress.remote(), timeout=10)
            except ray.exceptions.RayError:
                continue
            self._show(progress)
            if self.schedule.pending is not None:
                self._preempt(progress)

    def _show(self, progress: dict[str, Any]) -> None:
        group, last = progress["group"], progress["last"]
        if group is not None and group["group"] != self._shown_group:
            self._shown_group = group["group"]
            self.say(group_line(group, None))
        now = time.monotonic()
        if last is None or now - self._shown_at < PROGRESS_EVERY_S:
            return
        key = (last["attempt"], progress["steps_done"])
        if key != self._shown_step:
            self._shown_step, self._shown_at = key, now
            self.say(step_line(progress))

    def _preempt(self, progress: dict[str, Any]) -> None:
        group = progress["group"]
        if group is None:
            return
        view = GroupView(group["group"], group["nodes"], progress["group_first_step_t"],
                         progress["group_last_step_t"], progress["group_holding"],
                         progress["group_steps_done"])
        fire_if_due(self.schedule, view, progress["steps_done"], spot_nodes(), time.time(),
                    lambda row: self.ledger.add.remote("schedule", row), self.say)


def train(options: ElasticOptions, trainer: Any, ledger: Any, say: Say) -> Exception | None:
    """Ray Train's run, the driver's watch beside it; Ray Train's error if it gave up (the
    results still say how far it got)."""
    watch = Watch(ledger, Schedule(options.schedule), say)
    watcher = threading.Thread(target=watch.run, name="watch", daemon=True)
    watcher.start()
    try:
        trainer.fit()
    except Exception as failed:
        return failed
    finally:
        watch.stop.set()
    return None


def train_replicas(options: ElasticOptions, name: str, storage: str, filesystem: Any,
                   ledger: Any, ledger_name: str, say: Say) -> Exception | None:
    """Survivor mode (workloads/elastic/replicas.py): the run's own controller, to the end."""
    import torchft  # noqa: F401  (the Lighthouse's, and a requirement shipped with the job)

    settings = ReplicaSettings(
        **shipped_script(options, ledger_name), slots=options.max_workers, storage=storage,
        filesystem=filesystem, experiment=name, env=dict(QUIET_ENV))
    controller = ReplicaController(settings, options.train_loop_config, options.cpus,
                                   options.max_failures, Schedule(options.schedule), ledger, say)
    controller.run()
    return None if controller.error is None else RuntimeError(controller.error)


def run_experiment(options: ElasticOptions, say: Say) -> dict[str, Any]:
    """Train, account for every step, write the results (also when Ray Train gave up: the
    summary says how far it got, and why in `error`); returns the summary."""
    check_script(options.script_path(), options.function, options.torchft)
    for key, value in RAY_TRAIN_ENV.items():
        os.environ.setdefault(key, value)  # Ray Train hands them to its controller
    run_id = secrets.token_hex(4)
    with checkpoint_storage(options) as (storage, filesystem):
        ledger_name = LEDGER_NAME_PREFIX + run_id
        ledger = start_ledger(ledger_name, options.min_workers, options.max_workers,
                              handshake=options.on_notice == "checkpoint")
        started = time.time()
        if options.torchft:
            say(f"elastic: {options.script_path().name}:{options.function} as up to "
                f"{options.max_workers} torchft replica groups, checkpoints in {storage}")
            error = train_replicas(options, f"elastic-{run_id}", storage, filesystem,
                                   ledger, ledger_name, say)
        else:
            say(f"elastic: {options.script_path().name}:{options.function} on "
                f"{options.min_workers}..{options.max_workers} workers, checkpoints in "
                f"{storage}")
            error = train(options, make_trainer(options, f"elastic-{run_id}", storage,
                                                filesystem, ledger_name), ledger, say)
        ended = time.time()
        record = ray.get(ledger.snapshot.remote())
    summarized = summarize_replicas if options.torchft else summarize
    unreached = [point.text for point in options.schedule[len(record["schedule"]):]]
    if unreached:
        say(f"elastic: --preempt-at: the run ended before {len(unreached)} of its "
            f"{len(options.schedule)} points ({', '.join(unreached)}): no preemption for them")
    summary = {**summarized(record, started, ended, options.metric, failed=error is not None),
               "preemption_points_not_reached": unreached,
               "target": options.target,
               "script": options.script_path().name, "function": options.function,
               "on_notice": options.on_notice,
               "error": None if error is None else one_line(error, limit=500)}
    writer = ResultsWriter("elastic", options.out, options.s3_endpoint)
    for name in RECORDS:
        writer.add_records(name, [{**row, "t_run": row["t"] - started} for row in record[name]])
    document = provenance(options.parameters(), {"script": options.script_path()},
                          options.target, {})
    document["torch"] = package_version("torch")
    if options.torchft:
        document["torchft"] = package_version("torchft")
        document["lighthouse"] = LIGHTHOUSE_KWARGS
    document["ray_train_v2"] = os.environ.get("RAY_TRAIN_V2_ENABLED", "1") != "0"
    document["ray_train_env"] = {key: os.environ[key] for key in RAY_TRAIN_ENV}
    writer.finish(summary, document, to_log=options.results_to_log)
    say(f"elastic: {summary['steps_done']} steps, lost {summary['lost_steps']}, "
        f"{summary['preemptions']} preemptions, {summary['notices_honoured']}/"
        f"{summary['notices']} notices honoured; results in {writer.location}")
    return summary
