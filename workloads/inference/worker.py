"""A worker: answers one sub-job at a time (its queries as one batch through the job's ONNX
model, timed), writes the sub-job's answers to the file store as one part, and returns them
to the coordinator. Its sub-jobs run in a concurrency group of one thread (`run`), so the
coordinator can hand it the next sub-job while one runs: the next waits in Ray's queue and
starts the moment the running one ends. Pings and holds are answered beside them, on the
actor's other threads.

The model runs in the worker's runtime process (workloads.inference.runtime): its own
memory limit, an empty folder, no secrets; the worker itself reads the store. Before a
sub-job computes, the worker records that it started it (`jobs/<run id>/started/<sub-job>.
<worker>`), so if the worker dies the coordinator charges that sub-job alone, not the one
queued behind it. A sub-job whose runtime died or ran out of time is answered as such
(`failed`), charged to it alone, and the runtime starts again for the next.

What a worker keeps is bounded (`MemoryBudget`): test sets (least recently used out first)
within a quarter of its memory limit, models loaded in the runtime within a quarter of the
runtime's; `forget` drops a removed job's files at once.

Each answer carries its query's id (its row in the test set), so the merged output can be
checked id by id against the labels: a query lost or answered twice shows there.

Workers are detached named actors, so they outlive a coordinator that dies: its restarted
incarnation finds them again by name. A part's name is fixed by its job run and sub-job, so a
sub-job run twice (after a failure) overwrites its part instead of adding a second one.

A failure can be made to hit work in flight (`hold_mid_sub_job`): the worker stops after its
sub-job's answers are computed and before its part is stored, and waits there to be killed.
A kill at a random moment often lands between a sub-job's part and the coordinator
collecting it, which loses nothing and tests nothing.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict
from dataclasses import asdict
from typing import Any

import numpy as np
import ray

from workloads.common.storage import Storage, open_storage
from workloads.inference.files import store_file
from workloads.inference.models import (
    MAX_MODEL_BYTES,
    ModelFileError,
    ModelMemoryError,
    array_from_bytes,
    sha256,
)
from workloads.inference.runtime import (
    MemoryBudget,
    ModelRuntime,
    RuntimeDied,
    RuntimeTimedOut,
    resident_bytes,
)


def part_name(run_id: str, sub_job: int) -> str:
    return f"jobs/{run_id}/parts/{sub_job:06d}.json"


def started_name(run_id: str, sub_job: int, worker: str) -> str:
    """The marker a worker writes before it computes a sub-job."""
    return f"jobs/{run_id}/started/{sub_job:06d}.{worker}"


def check_part(part: Any, run_id: str, sub_jobs: int, batch_size: int,
               queries: int) -> dict[str, Any] | None:
    """A stored part as this worker writes it for that run, else None (torn, or not ours:
    its sub-job runs again)."""
    if not isinstance(part, dict) or part.get("run_id") != run_id:
        return None
    index, ids = part.get("sub_job"), part.get("ids")
    predictions, latencies = part.get("predictions"), part.get("latencies_s")
    if not (isinstance(index, int) and 0 <= index < sub_jobs and isinstance(ids, list)
            and isinstance(predictions, list) and isinstance(latencies, list)
            and len(ids) == len(predictions) == len(latencies)
            and len(ids) <= min(batch_size, queries)
            and all(isinstance(v, int) for v in ids + predictions)
            and all(isinstance(v, int | float) for v in latencies)
            and isinstance(part.get("finished_at"), int | float)
            and isinstance(part.get("busy_s"), int | float)):
        return None
    return part


class MidSubJobHold:
    """Stops a sub-job between two queries once asked: `request` returns what the sub-job
    had done when it stopped, and the sub-job's thread waits there until its process dies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wanted = False
        self._holding: dict[str, Any] | None = None
        self._held = threading.Event()

    def request(self, timeout_s: float) -> dict[str, Any] | None:
        """What the sub-job had done when it stopped (the next one, if none is running), or
        None if none stopped within `timeout_s` (then none will)."""
        with self._lock:
            self._wanted = True
        self._held.wait(timeout_s)
        with self._lock:
            self._wanted = False
            return self._holding

    def checkpoint(self, task: dict[str, Any], answered: int) -> None:
        """Called by the sub-job after each answer: returns at once unless a hold is asked,
        else never."""
        if not self._wanted:
            return
        with self._lock:
            if not self._wanted or self._holding is not None:
                return
            self._holding = {"run_id": task["run_id"], "sub_job": task["sub_job"],
                             "answered": answered, "of": task["count"]}
            self._held.set()
        threading.Event().wait()


RUN_GROUP = "run"
CANCELLED = {"failed": "cancelled", "error": "its job failed or was removed"}
FAILURES = ("model", "memory", "lost", "cancelled")
"""Why a sub-job got no answer: its model cannot answer it (the job fails), it ran out of
the runtime's memory (the job fails, naming the limit and the batch size), or the runtime
died or ran out of time under it (charged to it; re-run, up to the coordinator's limit), or
its job failed or was removed before it ended (`cancel`: nothing to charge)."""


class TestSets:
    """Test sets by (name, sha256), least recently used out first, within `budget` bytes."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.arrays: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()

    @property
    def held(self) -> int:
        return sum(array.nbytes for array in self.arrays.values())

    def get(self, key: tuple[str, str]) -> np.ndarray | None:
        if key in self.arrays:
            self.arrays.move_to_end(key)
            return self.arrays[key]
        return None

    def make_room(self, size: int) -> None:
        """Room for `size` more bytes, before they are read."""
        while self.arrays and self.held + size > self.budget:
            self.arrays.popitem(last=False)

    def put(self, key: tuple[str, str], array: np.ndarray) -> None:
        self.make_room(array.nbytes)
        self.arrays[key] = array

    def forget(self, digests: set[str]) -> None:
        for key in [key for key in self.arrays if key[1] in digests]:
            del self.arrays[key]


# Ray's stubs leave concurrency_groups out of ray.remote's keywords; Ray takes it
@ray.remote(max_restarts=0, concurrency_groups={RUN_GROUP: 1})  # type: ignore[call-overload]
class InferenceWorker:
    def __init__(self, name: str, store_uri: str, s3_endpoint: str | None,
                 memory: MemoryBudget, subjob_timeout_s: float) -> None:
        self.name = name
        self.store: Storage = open_storage(store_uri, s3_endpoint)
        self.memory = memory
        self.runtime = ModelRuntime(memory.runtime_bytes, subjob_timeout_s,
                                    memory.sessions_bytes)
        self.testsets = TestSets(memory.testsets_bytes)
        self.lock = threading.Lock()
        """Held by a sub-job while it uses the runtime and caches; `forget` takes it too."""
        self.hold = MidSubJobHold()
        self.cancelled: set[str] = set()
        """Runs of failed or removed jobs: their sub-jobs are not started here any more."""
        self.computing: str | None = None
        """The run whose sub-job the runtime is computing."""

    def ping(self) -> dict[str, Any]:
        context = ray.get_runtime_context()
        return {"name": self.name, "pid": os.getpid(), "node_id": context.get_node_id()}

    def memory_use(self) -> dict[str, Any]:
        """What the worker holds against its budget: test set bytes, the models loaded in
        its runtime, and both processes' resident memory."""
        with self.lock:
            return {"testsets_bytes": self.testsets.held,
                    "testsets": [name for name, _ in self.testsets.arrays],
                    "models_loaded": self.runtime.loaded(),
                    "worker_rss_bytes": resident_bytes(os.getpid()),
                    "runtime_rss_bytes": self.runtime.memory(), "budget": asdict(self.memory)}

    def forget(self, digests: list[str]) -> None:
        """A removed job's models and test sets, dropped (by sha256)."""
        with self.lock:
            self.testsets.forget(set(digests))
            self.runtime.drop(digests)

    def _read(self, name: str, digest: str, limit: int) -> bytes:
        """The file as job-add checked it (its sha256), else ModelFileError: the job fails
        rather than answer from another file of that name."""
        size = self.store.size(store_file(name))
        if size > limit:
            raise ModelFileError(f"{name}: {size} bytes, more than the {limit} a worker "
                                 "holds")
        data = self.store.read_bytes(store_file(name))
        if len(data) != size or sha256(data) != digest:
            raise ModelFileError(f"{name}: changed in the store since job-add")
        return data

    def _testset(self, name: str, digest: str) -> np.ndarray:
        array = self.testsets.get((name, digest))
        if array is None:
            self.testsets.make_room(self.store.size(store_file(name)))
            array = array_from_bytes(self._read(name, digest, self.memory.testsets_bytes),
                                     name)
            self.testsets.put((name, digest), array)
        return array

    def _predict(self, name: str, digest: str, batch: np.ndarray) -> tuple[np.ndarray, float]:
        try:
            return self.runtime.predict(name, digest, batch)
        except KeyError:  # not loaded yet, or no more: from the store, checked again there
            self.runtime.load(name, digest, self._read(name, digest, MAX_MODEL_BYTES))
            return self.runtime.predict(name, digest, batch)

    @ray.method(concurrency_group=RUN_GROUP)
    def run(self, task: dict[str, Any]) -> dict[str, Any]:
        """Answer queries [first, first + count) of the task's test set: one ONNX Runtime
        call on the whole sub-job (a batch), each query's latency that call's time. The
        part, or {"failed": one of FAILURES, "error": one line}."""
        began_run = time.perf_counter()
        digests = task["digests"]
        if task["run_id"] in self.cancelled:
            return CANCELLED
        self.store.write_bytes(started_name(task["run_id"], task["sub_job"], self.name), b"")
        with self.lock:
            self.computing = task["run_id"]
            try:
                if task["run_id"] in self.cancelled:  # cancelled before it was computing
                    return CANCELLED
                queries = self._testset(task["testset"], digests["testset"])[
                    task["first"]:task["first"] + task["count"]]
                answers, compute = self._predict(task["model"], digests["model"], queries)
            except ModelMemoryError as error:
                return {"failed": "memory", "error": str(error)}
            except (RuntimeDied, RuntimeTimedOut) as error:
                if task["run_id"] in self.cancelled:
                    return CANCELLED
                return {"failed": "lost", "error": str(error),
                        "runtime_starts": self.runtime.starts}
            except ModelFileError as error:
                return {"failed": "model", "error": str(error)}
            finally:
                self.computing = None
        self.hold.checkpoint(task, len(answers))
        predictions = [int(value) for value in answers]
        ids = list(range(task["first"], task["first"] + len(predictions)))
        part = {"run_id": task["run_id"], "sub_job": task["sub_job"], "first": task["first"],
                "ids": ids, "predictions": predictions,
                "latencies_s": [compute] * len(predictions), "compute_s": compute,
                "worker": self.name, "finished_at": time.time(),
                "busy_s": time.perf_counter() - began_run}
        self.store.write_bytes(part_name(task["run_id"], task["sub_job"]),
                               json.dumps(part).encode())
        return part

    def cancel(self, run_id: str) -> None:
        """The run's job failed or was removed: its sub-jobs queued here end unstarted, and
        one the runtime is computing is stopped with its runtime (started again for the
        next), instead of running on to --subjob-timeout."""
        self.cancelled.add(run_id)
        if self.computing == run_id:
            self.runtime.interrupt()

    def hold_mid_sub_job(self, timeout_s: float) -> dict[str, Any] | None:
        """Stop the running sub-job (or the next) after its next answer, half-done: its run
        id, sub-job, answers so far and of how many; None if no sub-job came in `timeout_s`.
        The worker does nothing more (a sub-job queued behind the held one never starts):
        what it held must be killed with it."""
        return self.hold.request(timeout_s)
