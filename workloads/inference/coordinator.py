"""The coordinator: a detached, named, restartable actor that owns the jobs and gives the
workers to them.

Its state lives in the file store, so a restarted incarnation (its constructor runs again)
resumes: `service/jobs/<job>.json` holds each job as the commands left it (a command rewrites
only its job's record, written before the command changes anything in memory, so a command
that fails changes nothing), `service/workers.json` the worker actors' names, and each
finished sub-job is a part under `jobs/<run id>/parts/`, written by the worker before it
answers, carrying the id of every query it answered. A sub-job is done exactly when its part
exists; the merged output reads each part once, in order, so a sub-job re-run after a worker
or the coordinator died is still counted once. In-flight sub-jobs of a dead incarnation are
queued again. A worker holds up to PIPELINE_DEPTH sub-jobs: the one it runs and the next,
so it never waits for the coordinator between two. Before it gives a worker a sub-job the
coordinator claims it in the store (`jobs/<run id>/claims/<sub-job>.<worker>`), so
whichever incarnation finds that worker dead knows what it held; each such re-run is
recorded as `jobs/<run id>/reruns/<sub-job>.<worker>`, so the count outlives the incarnation
that saw the death, and two incarnations that both see it count it once. Workers are found
again by name among the live actors of the service's namespace, not only from
`service/workers.json`: a coordinator killed while it writes that file, or between creating
a worker and recording it, leaves none running unknown. A job's runs are removed with it
(job-remove), and a finished run when the job starts afresh.

What it loads is checked as a command is: a stored job that does not pass is reported
(`job-status`, the actor's log) and skipped, never fatal; job-remove deletes it.

Commands answer from memory under one lock; the scheduling loop runs in a thread beside them.
Every command, a Ray call (the experiment's driver) or HTTP from the CLI (`endpoint.py`: a
thread per request in this process), goes through `command`, which checks it with the CLI's
own check (`options.parse_command`) and returns {"ok": True, ...} or {"ok": False, "error":
"<one line>"}. Each incarnation publishes where it answers to `service/endpoint.json`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import resource
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

import numpy as np
import ray
from ray.exceptions import ActorAlreadyExistsError, GetTimeoutError, RayActorError

from vocab.errors import one_line
from vocab.spot import SPOT_RESOURCE
from workloads.common import ray_private
from workloads.common.actors import start_actor
from workloads.common.options import OptionError
from workloads.common.storage import FileTooLarge, Storage, open_storage
from workloads.inference.endpoint import CommandEndpoint, listen_host, publish_endpoint
from workloads.inference.files import ADDING_FOLDER, JOBS_FOLDER, files_storage
from workloads.inference.models import (
    CHECK_TIMEOUT_S,
    MAX_MODEL_BYTES,
    ModelFileError,
    ModelMemoryError,
    Signature,
    array_from_bytes,
    first_rows,
    npy_header,
    shape_text,
)
from workloads.inference.options import (
    MAX_FILE_BYTES,
    MAX_JOBS,
    MAX_SUB_JOBS,
    Command,
    parse_command,
)
from workloads.inference.runtime import START_TIMEOUT_S, MemoryBudget, check_model_bounded
from workloads.inference.scheduler import Scheduler, free_places
from workloads.inference.stats import latency_stats, window_cost, window_rate
from workloads.inference.worker import InferenceWorker, check_part, started_name

NAMESPACE = "spotburst-inference"
COORDINATOR_NAME = "coordinator"
WORKER_PREFIX = "inference-worker-"
RUNS_FOLDER = "jobs"
"""A job run's parts and output: jobs/<run id>/parts/<sub-job>.json, jobs/<run id>/output.json."""
JobState = Literal["idle", "running", "done", "failed"]
STATES: tuple[JobState, ...] = get_args(JobState)
WorkerState = Literal["starting", "idle", "busy", "draining", "dead"]
"""The states as types: a misspelt one, assigned or compared (strict_equality for this
module in pyproject), fails mypy."""
WORKERS_FILE = "service/workers.json"
INCARNATION_FILE = "service/coordinator.json"
TICK_S = 0.02
PING_EVERY_S = 2.0
DRAIN_CHECK_EVERY_S = 1.0
PIPELINE_DEPTH = 2
"""Sub-jobs a worker holds at once: the one it runs and the next, handed to it while the
first runs, so it starts the next the moment the first ends instead of idling while the
answer goes back and the next sub-job comes out (a round trip each small batch would pay).
Each is claimed and charged to its job's share when it is handed out, as the first is; a
worker that dies gives all it held back, each counted as re-run once."""
MAX_SUB_JOB_DEATHS = 3
"""Times a sub-job may take down the runtime or the worker running it (a crash in the
model's runtime, a batch that never ends) before its job fails instead of taking more."""
ADMISSION_BYTES = 1024 * 1024 * 1024
"""Bytes of job files the coordinator holds at once for job-adds and job-starts being
checked (each reserves its model's size and its probe's before it reads anything)."""
PROBE_BYTES = 64 * 1024 * 1024
"""The most of a test set a check runs the model on: its first --batch-size rows, so a model
whose memory grows with the batch is refused at job-add, up to this many bytes of rows."""
HEADER_BYTES = 64 * 1024
"""Enough of a `.npy` file for its header."""
CHECKS_AT_ONCE = 2
"""Model checks (a runtime process each) run at once; others wait for a place."""
CHECKED_KEPT = 256
"""Models' checks remembered (by the sha256 of model and probe), oldest forgotten first."""
FILE_ROLES = ("model", "testset", "labels")


@dataclass(frozen=True)
class ServiceSettings:
    store: str
    s3_endpoint: str | None = None
    workers: int = 4
    policy: str = "fair"
    rebalance_s: float = 5.0
    window_s: float = 30.0
    subjob_timeout_s: float = 60.0
    worker_cpus: float = 1.0
    worker_resource: str | None = SPOT_RESOURCE
    worker_memory_mb: int = 2048
    """Each worker's memory limit (MemoryBudget: its runtime process and its test sets)."""
    command_token: str | None = None
    """The CLI's bearer token for the HTTP commands; None: no HTTP endpoint (Ray calls only)."""
    command_host: str | None = None
    """The address the endpoint binds (the local lab: loopback); None: the node's IP (every
    address of the pod in Kubernetes). Ray reports a lab node at the host's outward IP."""


class StoredRecordError(ValueError):
    """A record in the store that is not one this service could have written."""


@dataclass
class Job:
    name: str
    model: str
    testset: str
    labels: str
    batch_size: int
    queries: int
    state: JobState = "idle"
    run_id: str = ""
    added_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    error: str | None = None
    digests: dict[str, str] = field(default_factory=dict)
    """sha256 of the model, test set and labels as job-add checked them."""
    # not persisted: rebuilt from the parts
    done: dict[int, dict[str, Any]] = field(default_factory=dict)
    pending: deque[int] = field(default_factory=deque)
    completions: list[tuple[float, int, float]] = field(default_factory=list)
    duplicates: int = 0
    reran: set[str] = field(default_factory=set)
    """Sub-jobs run again after their worker died, as `<sub-job>.<worker>` (rerun_key)."""
    deaths: set[str] = field(default_factory=set)
    """Runtimes and workers a sub-job took down, as `<sub-job>.<worker>.<which>`: only the
    sub-job that was running is charged, never one queued behind it."""

    PERSISTED = ("name", "model", "testset", "labels", "batch_size", "queries", "state",
                 "run_id", "added_at", "started_at", "finished_at", "error", "digests")

    @property
    def reruns(self) -> int:
        return len(self.reran)

    def deaths_of(self, sub_job: int) -> int:
        return sum(1 for key in self.deaths if key.startswith(f"{sub_job:06d}."))

    @property
    def sub_jobs(self) -> int:
        return -(-self.queries // self.batch_size)

    def record(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.PERSISTED}

    def processed(self) -> int:
        return sum(len(part["predictions"]) for part in self.done.values())

    @classmethod
    def from_record(cls, name: str, record: Any) -> Job:
        """The job a stored record describes, checked as job-add checks a command (and
        every field this service writes); StoredRecordError says what is wrong."""
        if not isinstance(record, dict) or set(record) != set(cls.PERSISTED):
            raise StoredRecordError("not a job record (its fields differ)")
        try:
            added = parse_command("job_add", [record["name"], record["model"],
                                              record["testset"], record["labels"],
                                              record["batch_size"]])
        except OptionError as error:
            raise StoredRecordError(str(error)) from None
        if record["name"] != name:
            raise StoredRecordError(f"it names job {record['name']!r}")
        queries = record["queries"]
        if (not isinstance(queries, int) or isinstance(queries, bool) or queries < 1
                or -(-queries // record["batch_size"]) > MAX_SUB_JOBS):
            raise StoredRecordError(f"queries {queries!r}: expected a count of 1 to "
                                    f"{MAX_SUB_JOBS} sub-jobs")
        if record["state"] not in STATES:
            raise StoredRecordError(f"state {record['state']!r}: expected one of "
                                    f"{', '.join(STATES)}")
        run_id = record["run_id"]
        if not isinstance(run_id, str) or not (
                run_id == "" and record["state"] == "idle" or _is_run_id(name, run_id)):
            raise StoredRecordError(f"run_id {str(run_id)[:40]!r} does not fit state "
                                    f"{record['state']!r}")
        for key in ("added_at", "started_at", "finished_at"):
            value = record[key]
            if not (value is None and key != "added_at" or _is_time(value)):
                raise StoredRecordError(f"{key} {str(value)[:40]!r}: expected a time")
        if record["error"] is not None and not (isinstance(record["error"], str)
                                                and len(record["error"]) <= 1000):
            raise StoredRecordError("error: expected a text of at most 1000 characters")
        digests = record["digests"]
        if not (isinstance(digests, dict) and set(digests) == set(FILE_ROLES) and all(
                isinstance(value, str) and re.fullmatch("[0-9a-f]{64}", value)
                for value in digests.values())):
            raise StoredRecordError("digests: expected the sha256 of model, testset, labels")
        assert added.job is not None
        return cls(name, *added.job.files(), added.job.batch_size, queries, record["state"],
                   run_id, float(record["added_at"]), record["started_at"],
                   record["finished_at"], record["error"], dict(digests))


def rerun_key(sub_job: int, worker: str) -> str:
    """The name of a sub-job's claim or re-run marker: `<sub-job>.<worker>`."""
    return f"{sub_job:06d}.{worker}"


def parse_rerun_key(key: str) -> tuple[int, str] | None:
    index, _, worker = key.partition(".")
    if not (len(index) == 6 and index.isdigit() and _worker_number(worker) is not None):
        return None
    return int(index), worker


def _worker_number(name: str) -> int | None:
    number = name.removeprefix(WORKER_PREFIX)
    return int(number) if name.startswith(WORKER_PREFIX) and number.isdigit() else None


def new_run_id(name: str) -> str:
    return f"{name}-{secrets.token_hex(4)}"


def _is_run_id(name: str, run_id: str) -> bool:
    return re.fullmatch(re.escape(name) + "-[0-9a-f]{8}", run_id) is not None


def _is_time(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


@dataclass
class WorkerSlot:
    name: str
    handle: Any
    state: WorkerState = "starting"
    node_id: str | None = None
    pid: int | None = None
    held: list[tuple[str, int]] = field(default_factory=list)
    """(job, sub-job) handed to it and not answered yet, in the order it got them: the first
    is the one it runs, the others wait behind it (at most PIPELINE_DEPTH)."""
    since: float = field(default_factory=time.time)
    """When it became busy or last answered: when the sub-job it runs began, as far as the
    coordinator knows (the hung-worker timeout counts from here)."""
    pinged_at: float = 0.0

    @property
    def job(self) -> str | None:
        return self.held[0][0] if self.held else None

    @property
    def sub_job(self) -> int | None:
        return self.held[0][1] if self.held else None

    def release(self, job: str, sub_job: int) -> None:
        """(job, sub-job) is answered or taken back: a busy worker holding nothing is idle."""
        if (job, sub_job) in self.held:
            self.held.remove((job, sub_job))
        if self.state == "busy" and not self.held:
            self.state = "idle"


@dataclass
class InFlight:
    worker: str
    job: str
    run_id: str
    sub_job: int
    dispatched_at: float
    queries: int


def _node_ip() -> str:
    """The IP of this actor's node, as Ray knows it (`ray.util.get_node_ip_address()` in a
    worker answers the host's outward address, whatever node it is on)."""
    node_id = ray.get_runtime_context().get_node_id()
    for node in ray.nodes():
        if node["NodeID"] == node_id:
            return str(node["NodeManagerAddress"])
    raise RuntimeError(f"this actor's node {node_id} is not among Ray's nodes")


def _fail(error: str) -> dict[str, Any]:
    return {"ok": False, "error": error}


def _task_error(error: Exception) -> str:
    """What a failed sub-job raised, without Ray's traceback around it."""
    cause = getattr(error, "cause", None)
    return one_line(cause if isinstance(cause, BaseException) else error)


COORDINATOR_OPTIONS = {"max_restarts": -1, "max_task_retries": -1, "max_concurrency": 16}
"""Restarted by Ray whenever it dies, calls retried across a restart, commands answered
beside the scheduling loop."""


@ray.remote
class Coordinator:
    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = ServiceSettings(**settings)
        self.store: Storage = open_storage(self.settings.store, self.settings.s3_endpoint)
        self.files = files_storage(self.settings.store, self.settings.s3_endpoint)
        self.records = open_storage(f"{self.settings.store.rstrip('/')}/{JOBS_FOLDER}",
                                    self.settings.s3_endpoint)
        self.runs = open_storage(f"{self.settings.store.rstrip('/')}/{RUNS_FOLDER}",
                                 self.settings.s3_endpoint)
        self.lock = threading.RLock()
        self.jobs: dict[str, Job] = {}
        self.memory = MemoryBudget.of_mib(self.settings.worker_memory_mb)
        self.checked: dict[tuple[str, str], Signature] = {}
        """Models ONNX Runtime loaded and ran on a probe, by the sha256 of both: checked once."""
        self.checks = threading.BoundedSemaphore(CHECKS_AT_ONCE)
        self.adding: dict[str, tuple[str, str, str]] = {}
        """Jobs being added (their slot reserved before any file is read): name -> files."""
        self.in_flight_bytes = 0
        """Bytes of job files reserved by the job-adds and job-starts being checked."""
        self.most_in_flight_bytes = 0
        self.skipped: dict[str, str] = {}
        """Stored job records that did not pass the checks: name -> why (job-remove them)."""
        self.workers: dict[str, WorkerSlot] = {}
        self.scheduler = Scheduler(self.settings.policy)
        self.inflight: dict[Any, InFlight] = {}
        self.pings: dict[Any, str] = {}
        self.orphans: dict[str, list[tuple[str, str, int]]] = {}
        """Live workers' claims an earlier incarnation left unanswered: worker -> (job, run id,
        sub-job). A worker finishes what it holds before it answers a ping; if it dies
        instead, each one was in flight on it and is counted as re-run."""
        self.next_worker = 0
        self.claims = ThreadPoolExecutor(max_workers=8, thread_name_prefix="claims")
        self.cleanup = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cleanup")
        """Removes finished runs' files after the command that dropped them has answered (a
        long run leaves thousands: parts, claims, started markers)."""
        self.rebalanced_at = 0.0
        self.drain_checked_at = 0.0
        self.shares_log: list[dict[str, Any]] = []
        self.incarnation = self._next_incarnation()
        self._resume()
        self.stopping = False
        self.loop = threading.Thread(target=self._loop, name="scheduler", daemon=True)
        self.loop.start()
        self.endpoint: CommandEndpoint | None = None
        if self.settings.command_token:
            host = self.settings.command_host
            node_ip = host or _node_ip()
            self.endpoint = CommandEndpoint(self.command, self.settings.command_token,
                                            host or listen_host(node_ip, os.environ),
                                            advertised=node_ip)
            publish_endpoint(self.store, self.endpoint.url, self.incarnation)

    # --- persistence ------------------------------------------------------------------------

    def _read_json(self, name: str, default: Any, store: Storage | None = None) -> Any:
        try:
            return json.loads((store or self.store).read_bytes(name))
        except (OSError, ValueError, KeyError):  # missing, not a plain file, not JSON
            return default

    def _write_json(self, name: str, document: Any, store: Storage | None = None) -> None:
        (store or self.store).write_bytes(name, json.dumps(document, indent=1).encode())

    def _next_incarnation(self) -> int:
        recorded = self._read_json(INCARNATION_FILE, {})
        previous = recorded.get("incarnation") if isinstance(recorded, dict) else None
        if not isinstance(previous, int) or isinstance(previous, bool) or previous < 0:
            if recorded:
                print(f"coordinator: {INCARNATION_FILE} unreadable; counting from 1", flush=True)
            previous = 0
        self._write_json(INCARNATION_FILE, {"incarnation": previous + 1,
                                            "started_at": time.time()})
        return int(previous + 1)

    def _save_job(self, job: Job) -> None:
        self._write_json(f"{job.name}.json", job.record(), self.records)

    def _save_workers(self) -> None:
        alive = [name for name, slot in self.workers.items() if slot.state != "dead"]
        self._write_json(WORKERS_FILE, {"names": alive, "next": self.next_worker})

    def _resume(self) -> None:
        """Jobs from their records (each checked; a bad one is reported and skipped), their
        done sub-jobs, claims and re-runs from the runs' folder (listed once), the live
        workers; a sub-job a dead worker claimed and did not answer is counted as re-run.
        Job-adds an earlier incarnation was checking ended with it: their markers go."""
        adding = self._adding_storage()
        for marker in adding.names():
            adding.remove(marker)
        for file in self.records.names():
            name = file.removesuffix(".json")
            try:
                job = Job.from_record(name, self._read_json(file, None, self.records))
            except StoredRecordError as error:
                self._skip(name, f"{JOBS_FOLDER}/{file}: {error}")
                continue
            if len(self.jobs) >= MAX_JOBS:
                self._skip(name, f"{JOBS_FOLDER}/{file}: more than {MAX_JOBS} jobs stored")
                continue
            self.jobs[name] = job
        by_run = {job.run_id: job for job in self.jobs.values() if job.run_id}
        claims: dict[str, list[tuple[int, str]]] = {}
        for entry in self.runs.names():
            run_id, _, rest = entry.partition("/")
            if run_id not in by_run:
                continue
            folder, _, key = rest.partition("/")
            if folder == "parts":
                self._load_part(by_run[run_id], entry)
            elif folder == "claims" and (claim := parse_rerun_key(key)) is not None:
                claims.setdefault(run_id, []).append(claim)
            elif folder == "reruns" and parse_rerun_key(key) is not None:
                by_run[run_id].reran.add(key)
            elif folder == "deaths" and parse_rerun_key(key.rpartition(".")[0]) is not None:
                by_run[run_id].deaths.add(key)
        self._find_workers([worker for run in claims.values() for _, worker in run])
        for name, job in self.jobs.items():
            if job.state == "running":
                if len(job.done) == job.sub_jobs:
                    self._finish(job)
                    continue
                job.pending = deque(i for i in range(job.sub_jobs) if i not in job.done)
                self.scheduler.admit(name)
                for sub_job, worker in claims.get(job.run_id, []):
                    if sub_job in job.done:
                        continue
                    if worker in self.workers:  # known when it answers its ping
                        self.orphans.setdefault(worker, []).append(
                            (name, job.run_id, sub_job))
                    else:
                        self._lost_with_worker(job, sub_job, worker)

    def _find_workers(self, claimants: list[str]) -> None:
        """Every live worker of this service: those `service/workers.json` names and those
        Ray knows in the namespace (created by an incarnation that died before it recorded
        them, or whose record was torn by its death). New names follow every name used."""
        recorded = self._read_json(WORKERS_FILE, {})
        names = recorded.get("names") if isinstance(recorded, dict) else None
        following = recorded.get("next") if isinstance(recorded, dict) else None
        if isinstance(following, int) and not isinstance(following, bool) and following >= 0:
            self.next_worker = following
        live = [actor["name"] for actor in ray.util.list_named_actors(all_namespaces=True)
                if actor["namespace"] == NAMESPACE]
        candidates = [name for name in (names if isinstance(names, list) else []) + live
                      if isinstance(name, str) and _worker_number(name) is not None]
        for name in dict.fromkeys(candidates + claimants):
            self.next_worker = max(self.next_worker, (_worker_number(name) or 0) + 1)
        for name in dict.fromkeys(candidates):
            try:
                handle = ray.get_actor(name, namespace=NAMESPACE)
            except ValueError:
                continue  # it died with its node meanwhile
            self.workers[name] = WorkerSlot(name, handle)
            self.pings[handle.ping.remote()] = name
        self._save_workers()

    def _skip(self, name: str, reason: str) -> None:
        self.skipped[name] = reason
        print(f"coordinator: skipped the stored job {reason}", flush=True)

    def _load_part(self, job: Job, entry: str) -> None:
        part = check_part(self._read_json(entry, None, self.runs), job.run_id,
                          job.sub_jobs, job.batch_size, job.queries)
        if part is None:
            return  # torn by a worker killed while writing, or not ours: it runs again
        index = int(part["sub_job"])
        job.done[index] = part
        job.completions.append((float(part["finished_at"]), len(part["predictions"]),
                                float(part["busy_s"])))

    # --- the scheduling loop ----------------------------------------------------------------

    def _loop(self) -> None:
        while not self.stopping:
            try:
                with self.lock:
                    now = time.time()
                    if now - self.rebalanced_at >= self.settings.rebalance_s:
                        self._rebalance(now)
                    if now - self.drain_checked_at >= DRAIN_CHECK_EVERY_S:
                        self._mark_draining()
                        self.drain_checked_at = now
                    self._ensure_workers()
                    self._ping_idle(now)
                    self._dispatch()
                    self._time_out(now)
                    refs = list(self.inflight) + list(self.pings)
                if not refs:
                    time.sleep(TICK_S)
                    continue
                ready, _ = ray.wait(refs, num_returns=1, timeout=TICK_S)
                if ready:  # and whatever else is ready by now, without waiting
                    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
                with self.lock:
                    for ref in ready:
                        self._collect(ref)
            except Exception as error:  # keep serving; say why in the actor's log
                print(f"coordinator loop: {type(error).__name__}: {error}", flush=True)
                time.sleep(0.5)

    def _rebalance(self, now: float) -> None:
        running = [job for job in self.jobs.values() if job.state == "running"]
        costs = {job.name: window_cost(job.completions, now, self.settings.window_s)
                 for job in running}
        shares = self.scheduler.rebalance(costs)
        self.rebalanced_at = now
        self.shares_log.append({"t": now, "shares": shares, "costs": costs})
        del self.shares_log[:-100]

    def _mark_draining(self) -> None:
        try:
            draining = set(ray_private.draining_nodes())
        except Exception as error:  # keep scheduling, but never without saying drains go unseen
            print(f"coordinator: the draining nodes are unknown: {type(error).__name__}: "
                  f"{one_line(error)}", flush=True)
            return
        for slot in self.workers.values():
            if slot.node_id in draining and slot.state in ("idle", "starting", "busy"):
                slot.state = "draining"  # no new sub-job; a busy one finishes its own

    def _ensure_workers(self) -> None:
        """Replacements up to the asked number. Each name is recorded as used before its
        worker exists, so no incarnation makes it again; one this incarnation does not know
        (made by another, e.g. one that died before it recorded its workers) is taken over,
        never made twice."""
        live = [s for s in self.workers.values() if s.state in ("starting", "idle", "busy")]
        for _ in range(self.settings.workers - len(live)):
            name = f"{WORKER_PREFIX}{self.next_worker}"
            self.next_worker += 1
            self._save_workers()
            resources = ({self.settings.worker_resource: self.settings.worker_cpus}
                         if self.settings.worker_resource else {})
            try:
                handle = start_actor(
                    InferenceWorker, name, self.settings.store, self.settings.s3_endpoint,
                    self.memory, self.settings.subjob_timeout_s,
                    options={"name": name, "namespace": NAMESPACE, "lifetime": "detached",
                             "num_cpus": self.settings.worker_cpus, "resources": resources,
                             # Ray places by it; the worker's runtime enforces it
                             "memory": self.memory.limit_bytes,
                             "max_concurrency": 3})  # pings, holds, forgets beside sub-jobs
            except ActorAlreadyExistsError:
                handle = ray.get_actor(name, namespace=NAMESPACE)
                print(f"coordinator: took over the running worker {name}", flush=True)
            self.workers[name] = WorkerSlot(name, handle)
            self.pings[handle.ping.remote()] = name
            self._save_workers()

    def _ping_idle(self, now: float) -> None:
        """Idle and draining workers are pinged, so a dead node's worker is seen dead."""
        pinged = set(self.pings.values())
        for slot in self.workers.values():
            if (slot.state in ("idle", "draining") and slot.name not in pinged
                    and now - slot.pinged_at >= PING_EVERY_S):
                slot.pinged_at = now
                self.pings[slot.handle.ping.remote()] = slot.name

    def _dispatch(self) -> None:
        """Workers holding fewer than PIPELINE_DEPTH sub-jobs get more: every idle worker
        one before any busy one a second. Each is claimed in the store before its worker
        gets it (`<run id>/claims/<sub-job>.<worker>`), so whichever incarnation finds that
        worker dead knows what it held; a round's claims are written together."""
        planned: list[tuple[WorkerSlot, Job, int, int]] = []
        now = time.time()
        for worker in free_places({slot.name: len(slot.held) for slot in self.workers.values()
                                   if slot.state in ("idle", "busy")}, PIPELINE_DEPTH):
            waiting = [job.name for job in self.jobs.values()
                       if job.state == "running" and job.pending]
            name = self.scheduler.pick(waiting)
            if name is None:
                break
            job, slot = self.jobs[name], self.workers[worker]
            index = job.pending.popleft()
            count = min(job.batch_size, job.queries - index * job.batch_size)
            self.scheduler.charge(name, count)
            if slot.state == "idle":
                slot.state, slot.since = "busy", now
            slot.held.append((name, index))
            planned.append((slot, job, index, count))
        if not planned:
            return
        try:
            list(self.claims.map(lambda plan: self.runs.write_bytes(
                f"{plan[1].run_id}/claims/{rerun_key(plan[2], plan[0].name)}", b""), planned))
        except Exception:  # the store failed: nothing was given out
            for slot, job, index, count in reversed(planned):
                job.pending.appendleft(index)
                self.scheduler.charge(job.name, -count)
                slot.release(job.name, index)
            raise
        for slot, job, index, count in planned:
            task = {"run_id": job.run_id, "sub_job": index, "first": index * job.batch_size,
                    "count": count, "model": job.model, "testset": job.testset,
                    "digests": job.digests}
            ref = slot.handle.run.remote(task)
            self.inflight[ref] = InFlight(slot.name, job.name, job.run_id, index, now, count)

    def _time_out(self, now: float) -> None:
        """A hung worker (the original waited forever) is killed; what it held runs again.
        A worker stops its own runtime at --subjob-timeout and says so; this is for a worker
        that is itself stuck, after twice that and the runtime's start. Its time counts from
        when its running sub-job began (`since`), not from when the sub-job waiting behind
        it was handed out."""
        hung_after = 2 * self.settings.subjob_timeout_s + START_TIMEOUT_S
        for slot in self.workers.values():
            if slot.state == "busy" and now - slot.since > hung_after:
                print(f"coordinator: {slot.name} hung on {slot.job}#{slot.sub_job}; "
                      "killing it", flush=True)
                ray.kill(slot.handle, no_restart=True)
                slot.state = "dead"

    def _collect(self, ref: Any) -> None:
        if ref in self.pings:
            name = self.pings.pop(ref)
            slot = self.workers[name]
            try:
                info = ray.get(ref)
            except RayActorError:
                self._worker_died(slot)
                return
            slot.node_id, slot.pid = info["node_id"], info["pid"]
            self.orphans.pop(name, None)  # it finished what it held before it answered
            if slot.state == "starting":
                slot.state, slot.since = "idle", time.time()
            return
        flight = self.inflight.pop(ref)
        slot = self.workers[flight.worker]
        job = self.jobs.get(flight.job)
        current = job is not None and job.run_id == flight.run_id
        try:
            part = ray.get(ref)
        except RayActorError:
            self._worker_died(slot)
            if job is not None and current:
                self.scheduler.charge(job.name, -flight.queries)
                if job.state == "running" and flight.sub_job not in job.done:
                    job.pending.appendleft(flight.sub_job)
                    self._lost_with_worker(job, flight.sub_job, slot.name)
            return
        except Exception as error:  # the call itself failed: the job cannot go on
            part = {"failed": "model", "error": _task_error(error)}
        now = time.time()
        slot.release(flight.job, flight.sub_job)
        slot.since = now  # the sub-job it held next began when this one ended
        if job is None or not current:
            return  # the job was removed or restarted meanwhile
        if "failed" in part:
            self._sub_job_failed(job, flight, part)
            return
        if flight.sub_job in job.done:
            job.duplicates += 1  # answered before (by an earlier incarnation's worker)
            return
        job.done[flight.sub_job] = part
        job.completions.append((now, len(part["predictions"]), float(part["busy_s"])))
        if len(job.done) == job.sub_jobs and job.state == "running":
            self._finish(job)

    def _sub_job_failed(self, job: Job, flight: InFlight, failure: dict[str, Any]) -> None:
        """A worker answered that a sub-job got no answer: out of memory or the model cannot
        answer it (the job fails, saying why), or its runtime died or timed out under it
        (charged to it alone and run again, until MAX_SUB_JOB_DEATHS)."""
        error = " ".join(str(failure.get("error")).split())
        if failure["failed"] == "cancelled":  # its job failed or was removed: nothing to do
            return
        if failure["failed"] == "memory":
            self._fail_job(job, f"sub-job {flight.sub_job}: out of memory on a batch of "
                           f"{flight.queries} queries (--batch-size {job.batch_size}): the "
                           f"worker's runtime may take {self.memory.runtime_bytes // 2**20} "
                           f"of its {self.settings.worker_memory_mb} MiB "
                           f"(--worker-memory-mb); {error[:300]}")
        elif failure["failed"] == "lost" and job.state == "running":
            self.scheduler.charge(job.name, -flight.queries)
            job.pending.appendleft(flight.sub_job)
            self._count_rerun(job, flight.sub_job, flight.worker)
            self._charge_death(job, flight.sub_job, flight.worker,
                               f"r{failure.get('runtime_starts', 0)}",
                               f"its runtime died or ran out of time on a batch of "
                               f"{flight.queries} queries ({error})")
        else:
            self._fail_job(job, f"sub-job {flight.sub_job}: {error}")

    def _fail_job(self, job: Job, reason: str) -> None:
        """A running job fails with `reason` (job-status shows it); the others go on."""
        if job.state != "running":
            return
        failed = dataclasses.replace(job, state="failed", error=" ".join(reason.split())[:600])
        self._save_job(failed)
        job.state, job.error = failed.state, failed.error
        job.pending.clear()
        self.scheduler.leave(job.name)
        self._cancel_held(job)

    def _cancel_held(self, job: Job) -> None:
        """The workers holding sub-jobs of `job`'s run drop them (one running is stopped):
        a failed or removed job's sub-jobs keep no worker from the other jobs."""
        for slot in self.workers.values():
            if slot.state != "dead" and any(name == job.name for name, _ in slot.held):
                slot.handle.cancel.remote(job.run_id)

    def _worker_died(self, slot: WorkerSlot) -> None:
        if slot.state != "dead":
            slot.state, slot.since = "dead", time.time()
            self._save_workers()
        for name, run_id, sub_job in self.orphans.pop(slot.name, []):
            job = self.jobs.get(name)
            if job is not None and job.run_id == run_id and sub_job not in job.done:
                self._lost_with_worker(job, sub_job, slot.name)

    def _lost_with_worker(self, job: Job, sub_job: int, worker: str) -> None:
        """`sub_job` runs again because `worker` died holding it; it is charged the death
        only if the worker had started it (its marker, written before it computes) and not
        answered it: a sub-job queued behind the one that was running goes free."""
        self._count_rerun(job, sub_job, worker)
        try:
            self.runs.size(started_name(job.run_id, sub_job, worker).removeprefix("jobs/"))
        except (FileNotFoundError, OSError):
            return
        self._charge_death(job, sub_job, worker, "worker",
                           f"its worker died running it (a batch of {job.batch_size} queries)")

    def _charge_death(self, job: Job, sub_job: int, worker: str, which: str,
                      what: str) -> None:
        """A runtime or worker `sub_job` took down, recorded in the store (so the count
        outlives this incarnation); at MAX_SUB_JOB_DEATHS its job fails."""
        self._mark(job, job.deaths, "deaths", f"{rerun_key(sub_job, worker)}.{which}")
        deaths = job.deaths_of(sub_job)
        if deaths >= MAX_SUB_JOB_DEATHS:
            self._fail_job(job, f"sub-job {sub_job}: {what}, {deaths} times (out of memory "
                           f"under the worker's {self.settings.worker_memory_mb} MiB, a "
                           "crash in the model's runtime, or a batch that never ends)")

    def _count_rerun(self, job: Job, sub_job: int, worker: str) -> None:
        """`sub_job` runs again because `worker` died holding it: recorded in the store, so
        the count outlives this incarnation, and named by both, so it is counted once."""
        self._mark(job, job.reran, "reruns", rerun_key(sub_job, worker))

    def _mark(self, job: Job, marks: set[str], folder: str, key: str) -> None:
        """`key` into the job's set `marks` and its run's store folder, once."""
        if key in marks:
            return
        marks.add(key)
        try:
            self._write_json(f"{job.run_id}/{folder}/{key}", {"at": time.time()}, self.runs)
        except Exception as error:  # counted here; a later incarnation may miss it
            print(f"coordinator: recording {job.name}'s {folder} {key}: {one_line(error)}",
                  flush=True)

    def _finish(self, job: Job) -> None:
        """Merge the parts in order (each answer with its query id), score against the
        labels, write the job's output."""
        ids: list[int] = []
        predictions: list[int] = []
        for index in range(job.sub_jobs):
            ids.extend(job.done[index]["ids"])
            predictions.extend(job.done[index]["predictions"])
        try:
            labels = array_from_bytes(self.files.read_bytes(job.labels), job.labels)
            correct = sum(int(labels[i]) == p for i, p in zip(ids, predictions, strict=True)
                          if 0 <= i < len(labels))
            accuracy: float | None = correct / max(len(predictions), 1)
        except (OSError, ModelFileError) as error:  # removed or replaced meanwhile
            print(f"coordinator: {job.name}: labels unreadable: {one_line(error)}", flush=True)
            accuracy = None
        self._write_json(f"{job.run_id}/output.json", {
            "job": job.name, "run_id": job.run_id, "queries": job.queries,
            "answered": len(predictions), "accuracy": accuracy, "ids": ids,
            "predictions": predictions}, self.runs)
        finished = dataclasses.replace(job, state="done", finished_at=time.time())
        self._save_job(finished)
        job.state, job.finished_at = finished.state, finished.finished_at
        self.scheduler.leave(job.name)

    # --- commands ---------------------------------------------------------------------------

    def command(self, method: Any, args: Any) -> dict[str, Any]:
        """Every command, from Ray or HTTP: checked as the CLI checks it, then run; a
        refused or failed command changes nothing."""
        try:
            request = parse_command(method, args if isinstance(args, list | tuple) else [args])
        except OptionError as error:
            return _fail(str(error))
        handlers: dict[str, Callable[[Command], dict[str, Any]]] = {
            "job_add": self._job_add, "job_start": self._job_start, "job_stop": self._job_stop,
            "job_remove": self._job_remove, "job_status": self._job_status,
            "members": self._members}
        try:
            return handlers[request.method](request)
        except Exception as error:  # the store failed under it: one line, nothing changed
            return _fail(f"{request.method} failed: {type(error).__name__}: {one_line(error)}")

    def _job_add(self, request: Command) -> dict[str, Any]:
        """The job's slot is reserved under the lock before anything is read (parallel
        job-adds never pass the job limit together), and named in the store while its files
        are checked, so files-put refuses to replace them meanwhile."""
        assert request.name is not None and request.job is not None
        name, job_options = request.name, request.job
        files = job_options.files()
        with self.lock:
            if name in self.jobs or name in self.skipped or name in self.adding:
                return _fail(f"job {name!r} already exists (job-remove it first)")
            if len(self.jobs) + len(self.skipped) + len(self.adding) >= MAX_JOBS:
                return _fail(f"NAME: the service holds {MAX_JOBS} jobs, its most "
                             "(job-remove one first)")
            self.adding[name] = files
        marker, adding = f"{name}.json", self._adding_storage()
        try:
            adding.write_bytes(marker, json.dumps(dict(zip(FILE_ROLES, files,
                                                           strict=True))).encode())
            checked = self._check_files(*files, job_options.batch_size)
            if isinstance(checked, dict):
                return checked
            queries, digests = checked
            job = Job(name, *files, job_options.batch_size, queries, digests=digests)
            if job.sub_jobs > MAX_SUB_JOBS:
                return _fail(f"--batch-size: {queries} queries in batches of "
                             f"{job.batch_size} make {job.sub_jobs} sub-jobs, more than "
                             f"{MAX_SUB_JOBS}")
            with self.lock:  # held from adding to jobs at once: never counted twice
                self._save_job(job)
                self.jobs[name] = job
                del self.adding[name]
            return {"ok": True, "job": name, "queries": job.queries, "sub_jobs": job.sub_jobs}
        finally:
            with self.lock:
                self.adding.pop(name, None)
            adding.remove(marker)

    def _adding_storage(self) -> Storage:
        return open_storage(f"{self.settings.store.rstrip('/')}/{ADDING_FOLDER}",
                            self.settings.s3_endpoint)

    def _reserve(self, need: int) -> bool:
        """`need` bytes of the admission budget, if it has them now."""
        with self.lock:
            if self.in_flight_bytes + need > ADMISSION_BYTES:
                return False
            self.in_flight_bytes += need
            self.most_in_flight_bytes = max(self.most_in_flight_bytes, self.in_flight_bytes)
            return True

    def _release(self, need: int) -> None:
        with self.lock:
            self.in_flight_bytes -= need

    def _check_files(self, model: str, testset: str, labels: str,
                     batch_size: int) -> tuple[int, dict[str, str]] | dict[str, Any]:
        """A job's files as job-add and job-start check them: the model loaded and run on
        the test set's first --batch-size rows (up to PROBE_BYTES) in the runtime sandbox
        under a worker's memory limit, the test set's shape and element type against the
        model's input, one label per query. What is read is reserved first (the model's
        size and the probe's) and read with that bound; the test set and labels are hashed
        as they stream by. The number of queries and each file's sha256, or the refusal
        (one line naming the file)."""
        limits = {"--model": MAX_MODEL_BYTES,
                  "--testset": min(MAX_FILE_BYTES, self.memory.testsets_bytes),
                  "--labels": MAX_FILE_BYTES}
        sizes: dict[str, int] = {}
        for flag, file in (("--model", model), ("--testset", testset), ("--labels", labels)):
            try:
                sizes[flag] = self.files.size(file)
            except FileNotFoundError:
                return _fail(f"{flag}: no file {file!r} in the store (files-ls lists them)")
            except OSError as error:
                return _fail(f"{flag}: {file!r}: {one_line(error)}")
            if sizes[flag] > limits[flag]:
                holder = {"--model": "a model may take",
                          "--testset": "a worker holds (a quarter of --worker-memory-mb)",
                          "--labels": "a node holds"}[flag]
                return _fail(f"{flag}: {file!r} has {sizes[flag]} bytes, more than the "
                             f"{limits[flag]} {holder}")
        probe_size = min(sizes["--testset"], HEADER_BYTES + PROBE_BYTES)
        need = sizes["--model"] + probe_size + HEADER_BYTES
        if not self._reserve(need):
            return _fail(f"the service is checking other jobs' files ({ADMISSION_BYTES} "
                         "bytes at most at once); try again in a moment")
        try:
            return self._read_and_check(model, testset, labels, batch_size, sizes, probe_size)
        except FileTooLarge as error:
            return _fail(f"{error}")
        except FileNotFoundError as error:
            return _fail(f"a file of the job left the store while it was read: "
                         f"{one_line(error)}")
        finally:
            self._release(need)

    def _read_and_check(self, model: str, testset: str, labels: str, batch_size: int,
                        sizes: dict[str, int],
                        probe_size: int) -> tuple[int, dict[str, str]] | dict[str, Any]:
        model_data = b"".join(self.files.read_chunks(model, sizes["--model"]))
        digests = {"model": hashlib.sha256(model_data).hexdigest()}
        starts: dict[str, bytes] = {}
        for role, file, keep in (("testset", testset, probe_size),
                                 ("labels", labels, HEADER_BYTES)):
            digest, kept = hashlib.sha256(), bytearray()
            for chunk in self.files.read_chunks(file, sizes[f"--{role}"]):
                digest.update(chunk)
                if len(kept) < keep:
                    kept += chunk[:keep - len(kept)]
            digests[role], starts[role] = digest.hexdigest(), bytes(kept)
        try:
            header = npy_header(starts["testset"], sizes["--testset"], testset, kinds="biuf")
            truth = npy_header(starts["labels"], sizes["--labels"], labels, kinds="iu").shape
            if header.fortran:
                return _fail(f"--testset: {testset!r} is stored in Fortran order; save it "
                             "with np.save(path, np.ascontiguousarray(array))")
            rows = max(1, min(batch_size, PROBE_BYTES // max(header.row_bytes, 1)))
            probe = first_rows(starts["testset"], testset, rows, sizes["--testset"])
            key = (digests["model"], hashlib.sha256(
                f"{probe.dtype}{probe.shape}".encode() + probe.tobytes()).hexdigest())
            signature = self._checked_signature(key, model_data, model, probe)
        except ModelMemoryError as error:
            return _fail(f"--batch-size: {error}: a worker's runtime may take "
                         f"{self.memory.runtime_bytes // 2**20} MiB (--worker-memory-mb "
                         f"{self.settings.worker_memory_mb}); a smaller batch may fit")
        except ModelFileError as error:
            return _fail(str(error))
        shape, dtype = header.shape, header.dtype
        if len(shape) < 1 or shape[0] < 1 or signature.accepts(shape, dtype) is not None:
            return _fail(f"--testset: {testset!r} holds {dtype} of shape {shape_text(shape)}; "
                         f"model {model!r} takes {signature.shown()}")
        if truth != (shape[0],):
            return _fail(f"--labels: {labels!r} has shape {shape_text(truth)}; the test set "
                         f"has {shape[0]} queries")
        return shape[0], digests

    def _checked_signature(self, key: tuple[str, str], data: bytes, name: str,
                           probe: np.ndarray) -> Signature:
        """The model's signature from a check on `probe` (remembered by `key`); at most
        CHECKS_AT_ONCE run at once, the others wait their turn within the check's bound."""
        if key in self.checked:
            return self.checked[key]
        if not self.checks.acquire(timeout=CHECK_TIMEOUT_S):
            raise ModelFileError(f"{name}: the service is busy checking other models; try "
                                 "again in a moment")
        try:
            if key not in self.checked:  # checked by another call while this one waited
                self.checked[key] = check_model_bounded(data, name, probe,
                                                        memory_bytes=self.memory.runtime_bytes)
                while len(self.checked) > CHECKED_KEPT:
                    del self.checked[next(iter(self.checked))]
            return self.checked[key]
        finally:
            self.checks.release()

    def _known(self, name: str | None) -> Job | dict[str, Any]:
        if name in self.skipped:
            return _fail(f"job {name!r} was skipped: {self.skipped[name]} (job-remove it)")
        if name is None or name not in self.jobs:
            known = ", ".join(sorted(self.jobs)) or "none"
            return _fail(f"unknown job {name!r} (jobs: {known})")
        return self.jobs[name]

    def _job_start(self, request: Command) -> dict[str, Any]:
        with self.lock:
            job = self._known(request.name)
            if isinstance(job, dict):
                return job
            if job.state == "running":
                return _fail(f"job {job.name!r} is already running")
        # the files again, outside the lock (a check takes seconds): still as job-add found
        checked = self._check_files(job.model, job.testset, job.labels, job.batch_size)
        if isinstance(checked, dict):
            return _fail(f"job {job.name!r}: {checked['error']}")
        changed = [role for role in FILE_ROLES if checked[1][role] != job.digests.get(role)]
        if changed:
            return _fail(f"job {job.name!r}: its {changed[0]} "
                         f"{getattr(job, changed[0])!r} changed in the store since job-add "
                         "(job-remove the job and add it again)")
        with self.lock:
            current = self.jobs.get(job.name)
            if current is None or current is not job:
                return _fail(f"job {job.name!r} changed meanwhile; try again")
            if current.state == "running":  # started by another call meanwhile
                return _fail(f"job {job.name!r} is already running")
            fresh = job.state in ("done", "failed") or not job.run_id
            started = dataclasses.replace(job, state="running", started_at=time.time(),
                                          finished_at=None)
            if fresh:  # a new run: no parts yet
                started = dataclasses.replace(started, run_id=new_run_id(job.name), done={},
                                              completions=[], duplicates=0, reran=set(),
                                              error=None)
            started.pending = deque(i for i in range(started.sub_jobs)
                                    if i not in started.done)
            self._save_job(started)
            self.jobs[job.name] = started
            self.scheduler.admit(job.name)
            if not started.pending:  # every sub-job was answered while it was stopped
                self._finish(started)
            answer = {"ok": True, "job": job.name, "run_id": started.run_id,
                      "remaining_sub_jobs": len(started.pending)}
        if fresh and job.run_id:  # the old run's files, after the answer
            self.cleanup.submit(self._remove_run, job.run_id)
        return answer

    def _job_stop(self, request: Command) -> dict[str, Any]:
        """Back to idle; what is done stays done, job-start goes on from there."""
        with self.lock:
            job = self._known(request.name)
            if isinstance(job, dict):
                return job
            if job.state != "running":
                return _fail(f"job {job.name!r} is not running (it is {job.state})")
            self._save_job(dataclasses.replace(job, state="idle"))
            job.state = "idle"
            job.pending.clear()
            self.scheduler.leave(job.name)
            return {"ok": True, "job": job.name, "state": "idle",
                    "done_sub_jobs": len(job.done)}

    def _job_remove(self, request: Command) -> dict[str, Any]:
        """The job, its record and its runs' parts and output leave the store."""
        with self.lock:
            assert request.name is not None
            if request.name in self.skipped:
                self.records.remove(f"{request.name}.json")
                del self.skipped[request.name]
                return {"ok": True, "job": request.name, "removed": True}
            job = self._known(request.name)
            if isinstance(job, dict):
                return job
            if job.state == "running":
                return _fail(f"job {job.name!r} is running: job-stop it first")
            self.records.remove(f"{job.name}.json")
            del self.jobs[job.name]
            self.scheduler.leave(job.name)
            self._cancel_held(job)  # a stopped job's sub-jobs still held
            still_used = {digest for other in self.jobs.values()
                          for digest in other.digests.values()}
            unused = sorted(set(job.digests.values()) - still_used)
            workers = [slot.handle for slot in self.workers.values() if slot.state != "dead"]
        # outside the lock and after the answer: a run's thousands of files, and a call to
        # every worker, must not hold up scheduling, the other commands or this one
        if job.run_id:
            self.cleanup.submit(self._remove_run, job.run_id)
        for handle in workers if unused else []:  # their caches drop its files at once
            handle.forget.remote(unused)
        return {"ok": True, "job": job.name, "removed": True}

    def _remove_run(self, run_id: str) -> None:
        try:
            self.runs.remove_folder(run_id)
        except Exception as error:  # the command is done; the parts stay until next time
            print(f"coordinator: removing {RUNS_FOLDER}/{run_id}: {one_line(error)}",
                  flush=True)

    def _job_status(self, request: Command) -> dict[str, Any]:
        with self.lock:
            if request.name is not None:
                job = self._known(request.name)
                if isinstance(job, dict):
                    return job
                jobs = [job]
            else:
                jobs = list(self.jobs.values())
            answer: dict[str, Any] = {
                "ok": True, "coordinator_incarnation": self.incarnation,
                "policy": self.settings.policy,
                "jobs": {job.name: self._status(job) for job in jobs},
                "skipped": dict(self.skipped) if request.name is None else {}}
            outputs = {job.name: job.run_id for job in jobs if job.state == "done"}
        for name, run_id in outputs.items():  # store reads outside the lock: scheduling goes on
            answer["jobs"][name]["accuracy"] = self._read_json(
                f"jobs/{run_id}/output.json", {}).get("accuracy")
        return answer

    def _status(self, job: Job) -> dict[str, Any]:
        now = time.time()
        latencies = [value for part in job.done.values() for value in part["latencies_s"]]
        assigned = [s.name for s in self.workers.values()
                    if s.state == "busy" and any(held == job.name for held, _ in s.held)]
        processed = job.processed()
        start = job.started_at or now
        end = job.finished_at if job.state == "done" and job.finished_at else now
        output: dict[str, Any] = {
            "state": job.state, "model": job.model, "testset": job.testset,
            "labels": job.labels, "batch_size": job.batch_size, "run_id": job.run_id,
            "queries": job.queries, "processed": processed,
            "progress": processed / job.queries if job.queries else 0.0,
            "sub_jobs": job.sub_jobs, "sub_jobs_done": len(job.done),
            "query_rate": window_rate([(t, n) for t, n, _ in job.completions], end,
                                      self.settings.window_s, start),
            "cost_per_query_s": window_cost(job.completions, end, self.settings.window_s),
            "share": self.scheduler.shares.get(job.name),
            "assigned_workers": assigned,
            "latency": latency_stats(latencies),
            "reruns": job.reruns, "duplicates_discarded": job.duplicates,
            "deaths": len(job.deaths),
            "error": job.error,
        }
        return output

    def _members(self, request: Command) -> dict[str, Any]:
        with self.lock:
            workers = [{"name": s.name, "state": s.state, "node_id": s.node_id, "pid": s.pid,
                        "job": s.job, "sub_job": s.sub_job,
                        "held": [{"job": name, "sub_job": index} for name, index in s.held]}
                       for s in self.workers.values() if s.state != "dead"]
        nodes = [{"node_id": node["NodeID"], "alive": bool(node["Alive"]),
                  "labels": node.get("Labels", {}),
                  "cpus": node.get("Resources", {}).get("CPU", 0.0)}
                 for node in ray.nodes()]
        with self.lock:
            admission = {"jobs_being_added": len(self.adding),
                         "bytes_in_flight": self.in_flight_bytes,
                         "most_bytes_in_flight": self.most_in_flight_bytes,
                         "budget_bytes": ADMISSION_BYTES}
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {"ok": True, "coordinator_incarnation": self.incarnation,
                "nodes": nodes, "workers": workers, "admission": admission,
                "coordinator": {"pid": os.getpid(),
                                "cpu_s": usage.ru_utime + usage.ru_stime}}

    def settings_dict(self) -> dict[str, Any]:
        return {**asdict(self.settings), "command_token": None}  # the token stays private

    def shutdown(self) -> dict[str, Any]:
        """Stop the loop and kill every worker; the caller then kills this actor."""
        with self.lock:
            self.stopping = True
            for slot in self.workers.values():
                if slot.state != "dead":
                    try:
                        ray.kill(slot.handle, no_restart=True)
                    except (ValueError, GetTimeoutError):
                        pass
                    slot.state = "dead"
            self._save_workers()
            if self.endpoint is not None:
                self.endpoint.close()
                publish_endpoint(self.store, None, self.incarnation)
            return {"ok": True, "workers_stopped": len(self.workers)}
