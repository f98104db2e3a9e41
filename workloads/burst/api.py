"""`burst_map(fn, inputs)`: the burst schedulers in a researcher's own Ray driver.

Connected to a burst cluster (`ray.init(address=...)` on the login node: nodes labelled
with their site, worker nodes carrying the transfer slot), `burst_map` runs `fn(path)` on
every input path, which the on-prem nodes read in place (the HPC file system) and every
other node receives through the data-aware scheduler's transfers, and returns the results
in input order:

    from workloads.burst.api import burst_map
    results = burst_map(count_words, ["/share/inputs/a.txt", "/share/inputs/b"])
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ray

from workloads.burst.cluster import alive_nodes, head_node, task_cpus
from workloads.burst.data import DataSource, RunContext
from workloads.burst.inputs import TaskSpec
from workloads.burst.options import CALLABLE, SCHEDULERS, entry_files
from workloads.burst.scheduling.base import RunSetup, Say, Scheduler
from workloads.burst.scheduling.data_aware import DataAwareScheduler
from workloads.burst.scheduling.default import DefaultScheduler
from workloads.burst.work import Workload

ROOT = "/"
"""Inputs are named by absolute paths on the on-prem file system: the data location is its
root, each task's files relative to it."""


def input_tasks(inputs: Sequence[str | Path]) -> list[TaskSpec]:
    """One task per input path (a file, or a folder of files), in the given order."""
    tasks = []
    for index, given in enumerate(inputs):
        path = Path(given).resolve()
        if not path.exists():
            raise FileNotFoundError(f"burst_map: input {index}: {given}: no such file or folder")
        files = entry_files(path)
        if not files:
            raise ValueError(f"burst_map: input {index}: {given} is a folder without files")
        tasks.append(TaskSpec(
            f"{index:05d}-{path.name}", index,
            tuple(file.relative_to(ROOT).as_posix() for file in files),
            sum(file.stat().st_size for file in files),
            root=path.relative_to(ROOT).as_posix(),
        ))
    return tasks


def burst_map(
    fn: Callable[[str], Any],
    inputs: Sequence[str | Path],
    *,
    scheduler: str = "data-aware",
    cpus_per_task: int | None = None,
    stage_dir: str | Path | None = None,
    say: Say | None = None,
) -> list[Any]:
    """`[fn(path) for path in inputs]`, each call a task of the cluster Ray is connected to,
    placed by `scheduler` ("data-aware" or "default"); `fn` gets the path where its input
    is on the node that runs it (on-prem: in place; elsewhere: a staging copy, removed
    after). `cpus_per_task`: CPUs each task reserves (None: the smallest worker node's);
    `stage_dir`: where moved inputs are staged on each node (None: the temp dir); `say`:
    a progress line per task (None: silent). What `fn` raises on an input ends the map with
    a TaskFunctionError naming that input."""
    if scheduler not in SCHEDULERS:
        raise ValueError(f"burst_map: scheduler {scheduler!r}, expected one of {SCHEDULERS}")
    if not ray.is_initialized():
        raise RuntimeError("burst_map runs in a Ray driver: call ray.init(address=...) first")
    tasks = input_tasks(inputs)
    if not tasks:
        return []
    nodes = alive_nodes()
    cpus = task_cpus(nodes, cpus_per_task)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    stage_root = Path(stage_dir or Path(tempfile.gettempdir()) / "spotburst-burst-map")
    context = RunContext(DataSource("nfs", ROOT), str(stage_root / f"{stamp}-{scheduler}"),
                         {n.node_id: n.site for n in nodes}, head_node(nodes).node_id)
    workload = Workload(CALLABLE, 0, fn=fn, function=getattr(fn, "__name__", "fn"))
    workers = {n.node_id: n for n in nodes if n.is_worker}
    runner: Scheduler = DataAwareScheduler() if scheduler == "data-aware" \
        else DefaultScheduler()
    result = runner.run(RunSetup(context, workload, workers, cpus), tasks,
                        say or (lambda line: None))
    outputs = {record["task"]: record["output"] for record in result.records}
    return [outputs[task.name] for task in tasks]
