"""A worker: answers one sub-job at a time (one query after another, each timed), writes the
sub-job's answers to the file store as one part, and returns them to the coordinator.

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
from workloads.inference.models import Mlp, array_from_bytes


def part_name(run_id: str, sub_job: int) -> str:
    return f"jobs/{run_id}/parts/{sub_job:06d}.json"


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

    def _model(self, name: str) -> Mlp:
        if name not in self.models:
            self.models[name] = Mlp.from_bytes(self.store.read_bytes(store_file(name)), name)
        return self.models[name]

    def _array(self, name: str) -> np.ndarray:
        if name not in self.arrays:
            self.arrays[name] = array_from_bytes(self.store.read_bytes(store_file(name)), name)
        return self.arrays[name]

    def run(self, task: dict[str, Any]) -> dict[str, Any]:
        """Answer queries [first, first + count) of the task's test set."""
        model = self._model(task["model"])
        queries = self._array(task["testset"])[task["first"]:task["first"] + task["count"]]
        predictions: list[int] = []
        latencies: list[float] = []
        for query in queries:
            began = time.perf_counter()
            predictions.append(model.predict_one(query))
            latencies.append(time.perf_counter() - began)
        part = {"run_id": task["run_id"], "sub_job": task["sub_job"], "first": task["first"],
                "predictions": predictions, "latencies_s": latencies, "worker": self.name,
                "finished_at": time.time()}
        self.store.write_bytes(part_name(task["run_id"], task["sub_job"]),
                               json.dumps(part).encode())
        return part
