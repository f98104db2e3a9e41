"""What both schedulers share: the interface, the run's result, per-task records."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from workloads.burst.cluster import NodeInfo
from workloads.burst.data import RunContext
from workloads.burst.inputs import TaskSpec
from workloads.burst.scheduling.policy import STAGE_AHEAD_BYTES
from workloads.burst.work import Workload

MAX_ATTEMPTS = 4
Say = Callable[[str], None]


@dataclass
class RunResult:
    scheduler: str
    started: float  # wall clock of the first submission
    records: list[dict[str, Any]] = field(default_factory=list)
    retried: int = 0
    taken_over: int = 0  # tasks a node with a free slot took from another's queue at the tail
    taken_over_bytes_moved: int = 0  # bytes that crossed the link for those, in vain
    lost_nodes: list[str] = field(default_factory=list)
    finished: float = 0.0
    scheduler_cpu_s: float | None = None  # the driver's CPU while the run ran
    site_cpu_s: dict[str, float] = field(default_factory=dict)  # each site's, meanwhile
    site_cpu_by_kind_s: dict[str, dict[str, float]] = field(default_factory=dict)
    others_cpu_s: dict[str, float] = field(default_factory=dict)  # on each site's CPUs
    stolen_cpu_s: dict[str, float] = field(default_factory=dict)  # by the hypervisor

    @property
    def makespan_s(self) -> float:
        return self.finished - self.started


@dataclass(frozen=True)
class RunSetup:
    """Everything a scheduler needs for one run."""

    context: RunContext
    workload: Workload
    nodes: dict[str, NodeInfo]  # the worker nodes by id
    task_cpus: int
    stage_ahead_bytes: int = STAGE_AHEAD_BYTES  # data-aware: staged ahead per node, at most


class Scheduler(Protocol):
    name: str

    def run(self, setup: RunSetup, tasks: list[TaskSpec], say: Say) -> RunResult: ...


def task_record(
    result: RunResult, task: TaskSpec, raw: dict[str, Any], node: NodeInfo, attempt: int
) -> dict[str, Any]:
    """One per-task record; times are seconds since the run's first submission."""
    record: dict[str, Any] = {
        "scheduler": result.scheduler,
        "task": task.name,
        "bytes": task.nbytes,
        "node": node.node_id,
        "node_ip": node.ip,
        "role": node.role,
        "site": node.site,
        "attempt": attempt,
        "bytes_moved": raw.get("bytes_moved", 0),
        "output": raw.get("output"),
    }
    for key in ("transfer_start", "transfer_end", "compute_start", "compute_end"):
        record[key] = raw[key] - result.started if key in raw else None
    for key in ("transfer_cpu_s", "compute_cpu_s"):  # CPU the task's process used meanwhile
        record[key] = round(raw[key], 4) if key in raw else None
    if "loss" in raw:
        record["loss"] = raw["loss"]
    return record


def progress_line(result: RunResult, record: dict[str, Any], done: int, total: int) -> str:
    transfer = ""
    if record["transfer_start"] is not None:
        transfer = (
            f" transfer {record['transfer_end'] - record['transfer_start']:.2f}s"
            f" ({record['bytes_moved'] / 1e6:.1f} MB)"
        )
    compute = record["compute_end"] - record["compute_start"]
    return (
        f"[{result.scheduler}] {done}/{total} {record['task']} on {record['site']} "
        f"{record['role']} {record['node_ip']}{transfer} compute {compute:.2f}s "
        f"at {time.time() - result.started:.1f}s"
    )
