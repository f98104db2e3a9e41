"""The data-aware streaming scheduler on stock Ray: a driver-side controller.

Tasks are placed by `DataAwarePolicy` (learned speed, earliest finish, <= 5 pending per
node; once all are placed, a node with a free slot and nothing pending takes over a queued
task that would finish sooner on it). For every node the controller keeps one transfer
running (a task holding the node's `transfer_slot`, pinned there) that moves the next
pending task's data, and releases a compute task pinned to the node
(NodeAffinitySchedulingStrategy) as soon as a slot is free and its data is there, so
transfers overlap computation. A node whose task is lost (its worker
or node died) is dropped and its tasks are placed again on the others.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from vocab.burst import TRANSFER_RESOURCE
from workloads.burst.cluster import alive_ids
from workloads.burst.inputs import TaskSpec
from workloads.burst.scheduling.base import (
    MAX_ATTEMPTS,
    RunResult,
    RunSetup,
    Say,
    progress_line,
    task_record,
)
from workloads.burst.scheduling.policy import DataAwarePolicy, Job
from workloads.burst.work import run_task, transfer


@dataclass(frozen=True)
class Flight:
    kind: str  # "transfer" or "compute"
    node_id: str
    job: Job


class DataAwareScheduler:
    name = "data-aware"

    def run(self, setup: RunSetup, tasks: list[TaskSpec], say: Say) -> RunResult:
        return _Controller(setup, tasks, say).run()


class _Controller:
    def __init__(self, setup: RunSetup, tasks: list[TaskSpec], say: Say) -> None:
        self.setup = setup
        self.say = say
        self.specs = {task.name: task for task in tasks}
        self.unplaced: deque[Job] = deque(Job(t.name, float(t.nbytes)) for t in tasks)
        self.attempts = {task.name: 1 for task in tasks}
        self.transfers: dict[str, dict[str, Any]] = {}
        self.in_flight: dict[ray.ObjectRef, Flight] = {}
        self.policy = DataAwarePolicy(stage_ahead_bytes=setup.stage_ahead_bytes)
        for node in setup.nodes.values():
            self.policy.add_node(
                node.node_id,
                node.cpus // setup.task_cpus,
                needs_transfer=not setup.context.source.visible_at(node.site),
            )
        self.result = RunResult(DataAwareScheduler.name, time.time())

    def run(self) -> RunResult:
        while len(self.result.records) < len(self.specs):
            self._place()
            if not self.unplaced:
                self._take_over()
            for node_id in list(self.policy.nodes):
                self._release(node_id)
            if not self.in_flight:
                raise RuntimeError(
                    f"[{self.result.scheduler}] no node left to run {len(self.unplaced)} tasks"
                )
            [ref], _ = ray.wait(list(self.in_flight), num_returns=1)
            self._handle(ref, self.in_flight.pop(ref))
        self.result.finished = time.time()
        alive = alive_ids()
        self.result.lost_nodes = sorted(
            set(self.result.lost_nodes) | {n for n in self.setup.nodes if n not in alive}
        )
        return self.result

    def _now(self) -> float:
        return time.time()

    def _place(self) -> None:
        while self.unplaced:
            node_id = self.policy.choose(self.unplaced[0], self._now())
            if node_id is None:
                return
            self.policy.assign(self.unplaced.popleft(), node_id)

    def _take_over(self) -> None:
        for node_id in list(self.policy.nodes):
            moved = self.policy.take_over(node_id, self._now())
            if moved is None:
                continue
            job, source = moved
            self.result.taken_over += 1
            staged = self.transfers.pop(job.name, None)  # its data had reached `source`
            if staged is not None:
                self.result.taken_over_bytes_moved += staged.get("bytes_moved", 0)
            old, new = self.setup.nodes[source], self.setup.nodes[node_id]
            self.say(f"[{self.result.scheduler}] {job.name} moves from {old.site} {old.ip} to "
                     f"{new.site} {new.ip}: a free slot there finishes it sooner")

    def _pinned(self, node_id: str) -> NodeAffinitySchedulingStrategy:
        return NodeAffinitySchedulingStrategy(node_id, soft=False)

    def _release(self, node_id: str) -> None:
        context, spec = self.setup.context, self.specs
        job = self.policy.next_transfer(node_id, self._now())
        if job is not None:
            ref = transfer.options(
                resources={TRANSFER_RESOURCE: 1},
                scheduling_strategy=self._pinned(node_id),
                name=f"transfer-{job.name}",
                max_retries=0,
            ).remote(context, spec[job.name])
            self.in_flight[ref] = Flight("transfer", node_id, job)
        while (job := self.policy.next_compute(node_id)) is not None:
            self.policy.started(node_id, job, self._now())
            ref = run_task.options(
                num_cpus=self.setup.task_cpus,
                scheduling_strategy=self._pinned(node_id),
                name=f"compute-{job.name}",
            ).remote(context, self.setup.workload, spec[job.name], False)
            self.in_flight[ref] = Flight("compute", node_id, job)

    def _handle(self, ref: ray.ObjectRef, flight: Flight) -> None:
        if flight.node_id not in self.policy.nodes:
            return  # the node was dropped; its jobs are placed again already
        try:
            raw = ray.get(ref)
        except RayTaskError:
            raise  # the task's own exception: no node was lost
        except RayError as error:
            self._drop_node(flight, error)
            return
        if flight.kind == "transfer":
            seconds = raw["transfer_end"] - raw["transfer_start"]
            if self.policy.transfer_done(flight.node_id, flight.job, seconds):
                self.transfers[flight.job.name] = raw
            else:  # the job was taken over while its data moved here
                self.result.taken_over_bytes_moved += raw.get("bytes_moved", 0)
            return
        self.policy.finished(
            flight.node_id, flight.job, (raw["compute_end"] - raw["compute_start"]) * 1000.0
        )
        raw = {**self.transfers.pop(flight.job.name, {}), **raw}
        node = self.setup.nodes[flight.node_id]
        record = task_record(
            self.result, self.specs[flight.job.name], raw, node, self.attempts[flight.job.name]
        )
        self.result.records.append(record)
        self.say(progress_line(self.result, record, len(self.result.records), len(self.specs)))

    def _drop_node(self, flight: Flight, error: RayError) -> None:
        node = self.setup.nodes[flight.node_id]
        jobs = self.policy.remove_node(flight.node_id)
        self.result.lost_nodes.append(flight.node_id)
        self.say(
            f"[{self.result.scheduler}] {flight.kind} of {flight.job.name} failed on "
            f"{node.role} {node.ip} ({type(error).__name__}): dropping the node, placing "
            f"its {len(jobs)} tasks again"
        )
        for job in reversed(jobs):
            self.attempts[job.name] += 1
            if self.attempts[job.name] > MAX_ATTEMPTS:
                raise RuntimeError(f"task {job.name} failed {MAX_ATTEMPTS} times") from error
            self.transfers.pop(job.name, None)
            self.unplaced.appendleft(job)
        self.result.retried += len(jobs)
