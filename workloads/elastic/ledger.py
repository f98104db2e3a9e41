"""The run's ledger: one Ray actor on the driver's (never preempted) node that the controller
and every worker tell what happens — each worker group and its nodes, each step every rank
completed, each report and the checkpoint it carried, each checkpoint Ray Train committed,
each notice and hold, the controller's states — so that the driver can account for every
step after the run, however many worker groups came and went.

A "step" is the script's unit of progress: ElasticLoop's step, a `checkpoint_due()` call, or,
for a script that uses neither, one `ray.train.report`. Steps are numbered along the run's
lineage: a group resumed from a checkpoint that covers n steps does step n next.
"""

from __future__ import annotations

import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from workloads.common.actors import start_actor
from workloads.elastic.scaling import (
    MIN_MEASURED_STEPS,
    WARMUP_STEPS,
    choose_workers,
    measured_throughput,
)

LEDGER_NAME_PREFIX = "spotburst-elastic-ledger-"
RECORDS = ("groups", "attempts", "workers", "steps", "reports", "commits", "notices",
           "controller", "holds", "decisions", "resizes", "schedule", "hints")


class Ledger:
    def __init__(self, min_workers: int, max_workers: int, handshake: bool) -> None:
        self.min_workers, self.max_workers = min_workers, max_workers
        self.handshake = handshake
        self.rows: dict[str, list[dict[str, Any]]] = {name: [] for name in RECORDS}
        self.covered: dict[str, int] = {}  # checkpoint path -> steps it covers
        self.final: dict[str, Any] = {}
        self.total_steps: int | None = None
        self.commits_in_attempt = 0
        self.claimed: set[int] = set()

    # --- the controller --------------------------------------------------------------------

    def group_started(self, world_size: int, nodes: list[str]) -> int:
        """A worker group was placed (its workers' nodes by rank); returns its number."""
        group = len(self.rows["groups"])
        self.rows["groups"].append({"group": group, "t": time.time(), "world_size": world_size,
                                    "nodes": nodes})
        return group

    def committed(self, path: str | None, metrics: dict[str, Any]) -> None:
        """Ray Train consolidated a report of every rank (and registered its checkpoint)."""
        attempt = self._current_attempt()
        self.commits_in_attempt += 1
        self.rows["commits"].append({"t": time.time(), "attempt": attempt,
                                     "index": self.commits_in_attempt, "checkpoint": path,
                                     "metrics": metrics})

    def controller(self, row: dict[str, Any]) -> None:
        self.rows["controller"].append({"t": time.time(), **row})

    # --- the workers -----------------------------------------------------------------------

    def begin_attempt(self, world_size: int, resumed_from: str | None) -> dict[str, Any]:
        """Rank 0 of a group starts training: its attempt number (the group's) and the steps
        the checkpoint it resumes from covers."""
        groups = self.rows["groups"]
        attempt = groups[-1]["group"] if groups else len(self.rows["attempts"])
        if any(a["attempt"] == attempt for a in self.rows["attempts"]):
            attempt = max(a["attempt"] for a in self.rows["attempts"]) + 1
        covered = self.covered.get(resumed_from or "", 0) if resumed_from else 0
        self.commits_in_attempt = 0
        self.rows["attempts"].append({"attempt": attempt, "t": time.time(),
                                      "world_size": world_size, "resumed_from": resumed_from,
                                      "resumed_steps": covered})
        return {"attempt": attempt, "resumed_steps": covered}

    def set_total_steps(self, total: int) -> None:
        self.total_steps = total

    def add(self, record: str, row: dict[str, Any]) -> None:
        """One row of a worker's record (workers, steps, reports, notices, holds, hints)."""
        if record == "reports" and row.get("checkpoint"):
            self.covered[row["checkpoint"]] = row["steps_covered"]
        self.rows[record].append(row)

    def add_many(self, record: str, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            self.add(record, row)

    def finish(self, metrics: dict[str, Any]) -> None:
        self.final = {"t": time.time(), **metrics}

    # --- the scaling policy ----------------------------------------------------------------

    def choose_workers(self, fit: int, running: bool = False) -> int:
        """The worker count for the run now that `fit` fit (the original's rule on the throughput
        measured so far); each new decision recorded. A running group is not grown before
        its own throughput is measured: a restart's count is not undone before it trained."""
        attempts = self.rows["attempts"]
        current = attempts[-1]["world_size"] if attempts else None
        lead = self._lead_steps()
        if running and current is not None and fit >= current:
            mine = sum(1 for row in lead if row["attempt"] == attempts[-1]["attempt"])
            if mine <= WARMUP_STEPS + MIN_MEASURED_STEPS:
                return current
        measured = measured_throughput(lead)
        workers = choose_workers(measured, current, fit, self.min_workers, self.max_workers)
        decision = {"fit": fit, "current": current, "workers": workers}
        decisions = self.rows["decisions"]
        last = decisions[-1] if decisions else {}
        if {key: last.get(key) for key in decision} != decision:
            decisions.append({"t": time.time(), **decision, "throughput": {
                str(size): value for size, value in sorted(measured.items())}})
        return workers

    def request_resize(self, workers: int) -> None:
        """The scaling policy wants the latest group at `workers`: its ranks are to
        checkpoint and park first (they poll `resize_requested`)."""
        groups = self.rows["groups"]
        group = groups[-1]["group"] if groups else None
        if not any(r["group"] == group for r in self.rows["resizes"]):
            self.rows["resizes"].append({"t": time.time(), "group": group, "workers": workers})

    def resize_requested(self, group: int | None = None) -> int | None:
        """The worker count the policy asked group `group` (the latest: None) to resize to,
        if it asked."""
        if group is None:
            groups = self.rows["groups"]
            group = groups[-1]["group"] if groups else None
        return next((r["workers"] for r in self.rows["resizes"] if r["group"] == group), None)

    def parked_since(self, since: float) -> bool:
        """Whether the group running since `since` may be resized now: its ranks checkpointed
        and hold for it, or it takes no part in the handshake (notices ignored, or a script
        that marks no steps: resized as Ray Train does, from its latest checkpoint)."""
        holds = [h for h in self.rows["holds"] if h["t"] >= since]
        if holds:
            return holds[-1]["reason"] == "resize" and not holds[-1].get("expired")
        marked = any(s["kind"] == "step" and s["t"] >= since for s in self.rows["steps"])
        return not (self.handshake and marked)

    # --- survivor mode (--torchft: workloads/elastic/replicas.py) ---------------------------

    def claim_checkpoint(self, step: int) -> bool:
        """Whether the replica group asking keeps the checkpoint of `step` (the first to ask:
        one copy per step, whichever groups report one)."""
        if step in self.claimed:
            return False
        self.claimed.add(step)
        return True

    def latest_checkpoint(self) -> str | None:
        """The newest checkpoint committed (the one new replica groups start from when no
        group is left to heal them)."""
        commits = [c for c in self.rows["commits"] if c.get("checkpoint")]
        return commits[-1]["checkpoint"] if commits else None

    def replica_progress(self) -> dict[str, Any]:
        """The run's steps; its newest replica group's first step (a schedule's `Ns` counts
        from there) and the latest step of any."""
        steps = self.rows["steps"]
        last = steps[-1] if steps else {}
        joins = [r for r in self.rows["resizes"] if r.get("event") == "join"]
        newest = joins[-1]["replica_group"] if joins else None
        return {"steps_done": max((s["step"] + 1 for s in steps), default=0),
                "first_t": next((s["t"] for s in steps if s.get("replica_group") == newest),
                                None),
                "last_t": last.get("t"), "loss": last.get("loss"), "joins": len(joins),
                "leaves": sum(1 for r in self.rows["resizes"] if r.get("event") == "leave"),
                "stepped": sorted({s["replica_group"] for s in steps if "replica_group" in s})}

    # --- the driver ------------------------------------------------------------------------

    def progress(self) -> dict[str, Any]:
        steps = self.rows["steps"]
        attempts = self.rows["attempts"]
        groups = self.rows["groups"]
        latest = groups[-1] if groups else None
        rows = [s for s in steps if latest is not None and s["attempt"] == latest["group"]]
        mine = [s["t"] for s in rows]
        holds = [h for h in self.rows["holds"]
                 if latest is not None and h["attempt"] == latest["group"]]
        return {"last": steps[-1] if steps else None,
                "steps_done": max((s["step"] + 1 for s in steps), default=0),
                "total_steps": self.total_steps, "attempts": len(attempts),
                "group": latest, "group_first_step_t": min(mine, default=None),
                "group_last_step_t": max(mine, default=None),
                "group_steps_done": max((s["step"] + 1 for s in rows), default=0),
                "group_holding": bool(holds) and not holds[-1].get("expired"),
                "notices": sum(1 for n in self.rows["notices"] if n.get("agreed")),
                "checkpoints": sum(1 for r in self.rows["reports"] if r.get("checkpoint"))}

    def snapshot(self) -> dict[str, Any]:
        return {**self.rows, "final": self.final, "total_steps": self.total_steps}

    def _current_attempt(self) -> int | None:
        attempts = self.rows["attempts"]
        return attempts[-1]["attempt"] if attempts else None

    def _lead_steps(self) -> list[dict[str, Any]]:
        """One row per step and attempt (the first rank's to record it): the throughput."""
        seen: set[tuple[int, int]] = set()
        rows = []
        for row in self.rows["steps"]:
            key = (row["attempt"], row["step"])
            if key not in seen:
                seen.add(key)
                rows.append(row)
        return rows


def start_ledger(name: str, min_workers: int, max_workers: int, handshake: bool) -> Any:
    """The ledger, named for the workers (and the controller) to find, pinned to this (the
    driver's) node."""
    here = ray.get_runtime_context().get_node_id()
    return start_actor(ray.remote(Ledger), min_workers, max_workers, handshake, options={
        "name": name, "num_cpus": 0, "max_concurrency": 1,
        "scheduling_strategy": NodeAffinitySchedulingStrategy(here, soft=False)})
