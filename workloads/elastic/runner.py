"""The driver: the user's script, data-parallel on Ray Train V2 with an elastic worker
count, preemptions retried without limit, checkpoints in the run's storage; then the
accounting of every step from the ledger, written as results."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ray

from workloads.common.provenance import package_version, provenance
from workloads.common.ray_session import ray_session
from workloads.common.results import ResultsWriter
from workloads.elastic.entry import check_script, train_entry
from workloads.elastic.ledger import LEDGER_NAME_PREFIX, start_ledger
from workloads.elastic.loop import SETTINGS_KEY
from workloads.elastic.options import ElasticOptions
from workloads.elastic.summary import summarize

PROGRESS_EVERY_S = 2.0
Say = Callable[[str], None]


def place(path: Path) -> dict[str, str]:
    """A shipped path as each worker looks it up (see entry.local_path)."""
    return {"relative": str(path), "absolute": str(path.resolve())}


@contextmanager
def checkpoint_storage(options: ElasticOptions) -> Iterator[tuple[str, Any]]:
    """Where Ray Train keeps this run's checkpoints: next to the results in S3, else a
    local folder removed afterwards (the nodes of a local lab share this disk)."""
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


def train_config(options: ElasticOptions, ledger_name: str) -> dict[str, Any]:
    return {
        "argv": options.argv,
        "seed": options.seed,
        SETTINGS_KEY: {
            "ledger": ledger_name,
            "script": place(options.script_path()),
            "working_dir": place(options.working_dir) if options.working_dir else None,
            "checkpoint_every": options.checkpoint_every,
            "checkpoint_timeout": options.checkpoint_timeout,
            "on_notice": options.on_notice,
            "notice_poll": options.notice_poll,
            "cluster_rescale_timeout": options.cluster_rescale_timeout,
            "min_workers": options.min_workers,
            "max_workers": options.max_workers,
            "resources_per_worker": resources_per_worker(options),
        },
    }


def resources_per_worker(options: ElasticOptions) -> dict[str, float]:
    return {"CPU": options.cpus, **({"GPU": options.gpus} if options.gpus else {})}


def make_trainer(options: ElasticOptions, config: dict[str, Any], name: str, storage: str,
                 filesystem: Any, ledger_name: str) -> Any:
    import ray.train
    from ray.train.torch import TorchConfig

    from workloads.elastic.policy import ElasticTorchTrainer

    # ray.train's stubs describe the V1 configs; with Train V2 (the default) these are V2's
    train: Any = ray.train

    workers: int | tuple[int, int] = (
        options.max_workers if options.min_workers == options.max_workers
        else (options.min_workers, options.max_workers))
    resources = resources_per_worker(options)
    return ElasticTorchTrainer(
        train_entry,
        ledger_name=ledger_name,
        train_loop_config=config,
        torch_config=TorchConfig(backend="nccl" if options.gpus else "gloo"),
        scaling_config=train.ScalingConfig(
            num_workers=workers, use_gpu=options.gpus > 0, resources_per_worker=resources,
            elastic_resize_monitor_interval_s=options.cluster_rescale_timeout),
        run_config=train.RunConfig(
            name=name, storage_path=storage, storage_filesystem=filesystem,
            failure_config=train.FailureConfig(max_failures=options.max_failures,
                                         max_preemption_failures=-1),
            checkpoint_config=train.CheckpointConfig(num_to_keep=2)),
    )


def watch_progress(ledger: Any, say: Say, stop: threading.Event) -> None:
    shown = None
    while not stop.wait(PROGRESS_EVERY_S):
        try:
            progress = ray.get(ledger.progress.remote(), timeout=10)
        except ray.exceptions.RayError:
            continue
        last = progress["last"]
        if last is None or last == shown:
            continue
        shown = last
        loss = f", loss {last['loss']:.4f}" if "loss" in last else ""
        say(f"elastic: step {last['step'] + 1}/{progress['total_steps']} on "
            f"{last['world_size']} workers (attempt {last['attempt']}, "
            f"{progress['notices']} notices, {progress['checkpoints']} checkpoints){loss}")


def run_elastic(options: ElasticOptions, say: Say) -> dict[str, Any]:
    """Train, account for every step, write the results; returns the summary."""
    check_script(options.script_path())
    run_id = secrets.token_hex(4)
    with ray_session(), checkpoint_storage(options) as (storage, filesystem):
        ledger_name = LEDGER_NAME_PREFIX + run_id
        ledger = start_ledger(ledger_name, options.min_workers, options.max_workers)
        trainer = make_trainer(options, train_config(options, ledger_name),
                               f"elastic-{run_id}", storage, filesystem, ledger_name)
        say(f"elastic: {options.script_path().name} on {options.min_workers}.."
            f"{options.max_workers} workers, checkpoints in {storage}")
        stop = threading.Event()
        progress = threading.Thread(target=watch_progress, args=(ledger, say, stop), daemon=True)
        started = time.time()
        progress.start()
        try:
            trainer.fit()
        finally:
            stop.set()
            ended = time.time()
        record = ray.get(ledger.snapshot.remote())
    summary = {**summarize(record, started, ended), "target": options.target,
               "script": options.script_path().name, "on_notice": options.on_notice}
    writer = ResultsWriter("elastic", options.out, options.s3_endpoint)
    for name in ("attempts", "workers", "steps", "checkpoints", "notices", "holds",
                 "decisions"):
        writer.add_records(name, [{**row, "t_run": row["t"] - started} for row in record[name]])
    inputs = {"script": options.script_path()}
    document = provenance(options.parameters(), inputs, options.target,
                          {"seed": options.seed})
    document["torch"] = package_version("torch")
    document["ray_train_v2"] = os.environ.get("RAY_TRAIN_V2_ENABLED", "1") != "0"
    writer.finish(summary, document, to_log=options.results_to_log)
    say(f"elastic: {summary['steps_done']}/{summary['total_steps']} steps, lost "
        f"{summary['lost_steps']}, {summary['preemptions']} preemptions, "
        f"{summary['notices_honoured']}/{summary['notices']} notices honoured; "
        f"results in {writer.location}")
    return summary
