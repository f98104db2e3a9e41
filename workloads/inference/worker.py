"""A worker: answers one sub-job at a time (one query after another, each timed), writes the
sub-job's answers to the file store as one part, and returns them to the coordinator.

Each answer carries its query's id (its row in the test set), so the merged output can be
checked id by id against the labels: a query lost or answered twice shows there.

Workers are detached named actors, so they outlive a coordinator that dies: its restarted
incarnation finds them again by name. A part's name is fixed by its job run and sub-job, so a
sub-job run twice (after a failure) overwrites its part instead of adding a second one.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np
import ray

from workloads.common.storage import Storage, open_storage
from workloads.inference.files import store_file
from workloads.inference.models import Mlp, ModelFileError, array_from_bytes
from workloads.inference.options import MAX_FILE_BYTES


def part_name(run_id: str, sub_job: int) -> str:
    return f"jobs/{run_id}/parts/{sub_job:06d}.json"


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


@ray.remote(max_restarts=0)
class InferenceWorker:
    def __init__(self, name: str, store_uri: str, s3_endpoint: str | None) -> None:
        self.name = name
        self.store: Storage = open_storage(store_uri, s3_endpoint)
        self.models: dict[str, Mlp] = {}
        self.arrays: dict[str, np.ndarray] = {}

    def ping(self) -> dict[str, Any]:
        context = ray.get_runtime_context()
        return {"name": self.name, "pid": os.getpid(), "node_id": context.get_node_id()}

    def _read(self, name: str) -> bytes:
        size = self.store.size(store_file(name))
        if size > MAX_FILE_BYTES:
            raise ModelFileError(f"{name}: {size} bytes, more than {MAX_FILE_BYTES}")
        return self.store.read_bytes(store_file(name))

    def _model(self, name: str) -> Mlp:
        if name not in self.models:
            self.models[name] = Mlp.from_bytes(self._read(name), name)
        return self.models[name]

    def _array(self, name: str) -> np.ndarray:
        if name not in self.arrays:
            self.arrays[name] = array_from_bytes(self._read(name), name)
        return self.arrays[name]

    def run(self, task: dict[str, Any]) -> dict[str, Any]:
        """Answer queries [first, first + count) of the task's test set."""
        began_run = time.perf_counter()
        model = self._model(task["model"])
        queries = self._array(task["testset"])[task["first"]:task["first"] + task["count"]]
        predictions: list[int] = []
        latencies: list[float] = []
        for query in queries:
            began = time.perf_counter()
            predictions.append(model.predict_one(query))
            latencies.append(time.perf_counter() - began)
        ids = list(range(task["first"], task["first"] + len(predictions)))
        part = {"run_id": task["run_id"], "sub_job": task["sub_job"], "first": task["first"],
                "ids": ids, "predictions": predictions, "latencies_s": latencies,
                "worker": self.name, "finished_at": time.time(),
                "busy_s": time.perf_counter() - began_run}
        self.store.write_bytes(part_name(task["run_id"], task["sub_job"]),
                               json.dumps(part).encode())
        return part
