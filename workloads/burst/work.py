"""The Ray tasks of a run: moving a task's data (data-aware) and computing it (both
schedulers; the default scheduler's task moves its own data first when it must)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import ray

from workloads.burst import compute
from workloads.burst.data import (
    DataSource,
    RunContext,
    fetch,
    get_keeping_resources,
    read_inputs,
    unstage,
)
from workloads.burst.inputs import TaskSpec
from workloads.burst.options import CALLABLE, OWN
from workloads.common.user_code import function_of, local_path


class TaskFunctionError(Exception):
    """The user's task function raised on an input, or returned what JSON cannot hold."""


@dataclass(frozen=True)
class Workload:
    """Which computation runs, and (param-server) the actor that receives the gradients."""

    kind: str  # "image", "param-server" or "own"
    seed: int
    parameter_server: Any = None
    script: dict[str, str] | None = None  # own: the task file, as each node finds it
    function: str = "process"
    fn: Any = None  # callable: burst_map's function, sent with the task by Ray


@ray.remote(num_cpus=0)
class AsyncParameterServer:
    """Pinned to the head: applies gradients as they arrive (SGD, learning rate 1e-2)."""

    def __init__(self, seed: int, learning_rate: float = 1e-2) -> None:
        self.weights = compute.initial_weights(seed)
        self.learning_rate = learning_rate
        self.updates = 0

    def get_weights(self) -> dict[str, np.ndarray]:
        return self.weights

    def apply_gradients(self, grads: dict[str, np.ndarray]) -> None:
        for name, grad in grads.items():
            self.weights[name] -= self.learning_rate * grad
        self.updates += 1

    def stats(self) -> dict[str, float]:
        norm = float(np.sqrt(sum(float((w**2).sum()) for w in self.weights.values())))
        return {"updates": self.updates, "weight_norm": norm}


def own_input_path(context: RunContext, task: TaskSpec, site: str) -> Path:
    """Where the task's input is read on this node: in place when this site sees the data,
    else in the task's staging folder (its files checked there)."""
    if context.source.visible_at(site):
        return Path(context.source.uri) / task.root
    target = context.stage_dir(task)
    missing = [name for name in task.files if not (target / name).is_file()]
    if missing:
        raise FileNotFoundError(f"task {task.name}: {len(missing)} input files not staged "
                                f"in {target} (first: {missing[0]})")
    return target / task.root


def call_own(workload: Workload, task: TaskSpec, path: Path) -> dict[str, Any]:
    """The user's function on one input; what it raises, or a result JSON cannot hold, is a
    TaskFunctionError naming the input (the user's traceback chained to it)."""
    if workload.fn is not None:
        function = workload.fn
    else:
        assert workload.script is not None
        function = function_of(local_path(workload.script), workload.function, "--script",
                               "--function")
    try:
        value = function(str(path))
    except Exception as error:
        raise TaskFunctionError(f"{workload.function}() raised on input "
                                f"{task.name!r}: {type(error).__name__}: "
                                f"{' '.join(str(error).split())}") from error
    try:
        json.dumps(value)
    except (TypeError, ValueError) as error:
        raise TaskFunctionError(f"{workload.function}() returned a "
                                f"{type(value).__name__} on input {task.name!r}, which JSON "
                                f"cannot hold ({error})") from None
    return {"output": value}


def _compute(workload: Workload, task: TaskSpec, files: list[bytes]) -> dict[str, Any]:
    if workload.kind == "image":
        thumbnail = compute.transform_image(files[0], workload.seed * 100003 + task.index)
        return {"output": compute.digest(thumbnail), "output_bytes": len(thumbnail)}
    weights = get_keeping_resources(workload.parameter_server.get_weights.remote())
    batch = compute.load_batch(files)
    grads, loss = compute.gradient(weights, batch, np.array(task.labels))
    workload.parameter_server.apply_gradients.remote(grads)
    return {"output": f"loss={loss:.4f}", "loss": loss}


@ray.remote(num_cpus=0)
def warm_up(source: DataSource) -> str:
    """Run once per node and resource shape before timing, so that neither scheduler pays
    inside its makespan for starting Ray worker processes, nor for a worker's first client
    of the bucket (importing boto3 and making the client take a fifth of a second of CPU)."""
    if source.kind == "s3":
        source.storage()
    return ray.get_runtime_context().get_node_id()


@ray.remote(num_cpus=0)
def transfer(context: RunContext, task: TaskSpec) -> dict[str, Any]:
    """Data-aware: move the task's data to this node ahead of its compute."""
    cpu = time.process_time()
    start, end, moved = fetch(context, task)
    return {"transfer_start": start, "transfer_end": end, "bytes_moved": moved,
            "transfer_cpu_s": time.process_time() - cpu}


@ray.remote(max_retries=0)
def run_task(
    context: RunContext, workload: Workload, task: TaskSpec, fetch_if_needed: bool
) -> dict[str, Any]:
    """Compute one task on whatever node runs this; with `fetch_if_needed` (the default
    scheduler) a node that cannot see the data fetches it first, inside the task."""
    site = context.site_of_this_node()
    record: dict[str, Any] = {"node": ray.get_runtime_context().get_node_id(), "site": site}
    if fetch_if_needed and not context.source.visible_at(site):
        cpu = time.process_time()
        start, end, moved = fetch(context, task)
        record.update(transfer_start=start, transfer_end=end, bytes_moved=moved,
                      transfer_cpu_s=time.process_time() - cpu)
    try:
        start, cpu = time.time(), time.process_time()
        if workload.kind in (OWN, CALLABLE):
            record.update(call_own(workload, task, own_input_path(context, task, site)))
        else:
            record.update(_compute(workload, task, read_inputs(context, task, site)))
        record.update(compute_start=start, compute_end=time.time(),
                      compute_cpu_s=time.process_time() - cpu)
    finally:
        unstage(context, task)
    return record
