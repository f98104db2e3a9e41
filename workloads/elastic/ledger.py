"""The run's ledger: one Ray actor on the driver's (never preempted) node that every
training attempt tells what it does — which workers on which nodes, each completed step,
each notice seen, each checkpoint and hold — so that the driver can account for every step
after the run, however many worker groups came and went."""

from __future__ import annotations

import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from workloads.common.actors import start_actor
from workloads.elastic.scaling import choose_workers, measured_throughput

LEDGER_NAME_PREFIX = "spotburst-elastic-ledger-"


class Ledger:
    def __init__(self, min_workers: int, max_workers: int) -> None:
        self.min_workers, self.max_workers = min_workers, max_workers
        self.decisions: list[dict[str, Any]] = []
        self.attempts: list[dict[str, Any]] = []
        self.workers: list[dict[str, Any]] = []
        self.steps: list[dict[str, Any]] = []
        self.checkpoints: list[dict[str, Any]] = []
        self.notices: list[dict[str, Any]] = []
        self.holds: list[dict[str, Any]] = []
        self.final: dict[str, Any] = {}
        self.total_steps: int | None = None

    def begin_attempt(self, world_size: int, start_step: int, resumed_from: int | None,
                      total_steps: int) -> int:
        """A new worker group starts (rank 0 calls this); returns its attempt number."""
        attempt = len(self.attempts)
        self.total_steps = total_steps
        self.attempts.append({"attempt": attempt, "t": time.time(), "world_size": world_size,
                              "start_step": start_step, "resumed_from_step": resumed_from})
        return attempt

    def worker(self, row: dict[str, Any]) -> None:
        self.workers.append(row)

    def step(self, row: dict[str, Any]) -> None:
        self.steps.append(row)

    def checkpoint(self, row: dict[str, Any]) -> None:
        self.checkpoints.append(row)

    def notice(self, row: dict[str, Any]) -> None:
        self.notices.append(row)

    def hold(self, row: dict[str, Any]) -> None:
        self.holds.append(row)

    def finish(self, metrics: dict[str, Any]) -> None:
        self.final = {"t": time.time(), **metrics}

    def choose_workers(self, fit: int) -> int:
        """The worker count for the run now that `fit` fit (the seed's rule on the throughput
        measured so far); each new decision recorded."""
        current = self.attempts[-1]["world_size"] if self.attempts else None
        measured = measured_throughput(self.steps)
        workers = choose_workers(measured, current, fit, self.min_workers, self.max_workers)
        decision = {"fit": fit, "current": current, "workers": workers}
        last = self.decisions[-1] if self.decisions else {}
        if {key: last.get(key) for key in decision} != decision:
            self.decisions.append({"t": time.time(), **decision, "throughput": {
                str(size): value for size, value in sorted(measured.items())}})
        return workers

    def parked_since(self, since: float) -> bool:
        """Whether the running group (begun at `since`) checkpointed and holds for a resize."""
        holds = [h for h in self.holds if h["t"] >= since]
        return bool(holds) and holds[-1]["reason"] == "resize" and not holds[-1].get("expired")

    def progress(self) -> dict[str, Any]:
        last = self.steps[-1] if self.steps else None
        return {"attempts": len(self.attempts), "last": last, "total_steps": self.total_steps,
                "notices": len(self.notices), "checkpoints": len(self.checkpoints)}

    def snapshot(self) -> dict[str, Any]:
        return {"attempts": self.attempts, "workers": self.workers, "steps": self.steps,
                "checkpoints": self.checkpoints, "notices": self.notices,
                "holds": self.holds, "decisions": self.decisions, "final": self.final,
                "total_steps": self.total_steps}


def start_ledger(name: str, min_workers: int, max_workers: int) -> Any:
    """The ledger, named for the workers (and the scaling policy) to find, pinned to this
    (the driver's) node."""
    here = ray.get_runtime_context().get_node_id()
    return start_actor(ray.remote(Ledger), min_workers, max_workers, options={
        "name": name, "num_cpus": 0, "max_concurrency": 1,
        "scheduling_strategy": NodeAffinitySchedulingStrategy(here, soft=False)})
