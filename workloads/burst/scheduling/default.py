"""Ray's default scheduler: every task submitted at once with plain placement; a task that
lands where its data is not visible fetches it first, inside the task (the original's
"manual" mode). A task lost with its node is submitted again, to plain placement."""

from __future__ import annotations

import time

import ray
from ray.exceptions import RayError, RayTaskError

from workloads.burst.cluster import alive_ids, describe
from workloads.burst.inputs import TaskSpec
from workloads.burst.scheduling.base import (
    MAX_ATTEMPTS,
    RunResult,
    RunSetup,
    Say,
    progress_line,
    task_record,
)
from workloads.burst.work import run_task


class DefaultScheduler:
    name = "default"

    def run(self, setup: RunSetup, tasks: list[TaskSpec], say: Say) -> RunResult:
        result = RunResult(self.name, time.time())

        def submit(task: TaskSpec) -> ray.ObjectRef:
            return run_task.options(num_cpus=setup.task_cpus, name=f"compute-{task.name}").remote(
                setup.context, setup.workload, task, True
            )

        in_flight = {submit(task): (task, 1) for task in tasks}
        while in_flight:
            [ref], _ = ray.wait(list(in_flight), num_returns=1)
            task, attempt = in_flight.pop(ref)
            try:
                raw = ray.get(ref)
            except RayError as error:
                if isinstance(error, RayTaskError) or attempt >= MAX_ATTEMPTS:
                    raise  # the task's own exception is no loss to retry
                result.retried += 1
                say(
                    f"[{self.name}] {task.name} failed ({type(error).__name__}); "
                    f"submitting it again (attempt {attempt + 1})"
                )
                in_flight[submit(task)] = (task, attempt + 1)
                continue
            node = setup.nodes.get(raw["node"]) or describe({"NodeID": raw["node"]})
            record = task_record(result, task, raw, node, attempt)
            result.records.append(record)
            say(progress_line(result, record, len(result.records), len(tasks)))
        result.finished = time.time()
        alive = alive_ids()
        result.lost_nodes = sorted(n for n in setup.nodes if n not in alive)
        return result
