"""The compute time per task that both schedulers are measured against, taken before either
runs: every worker node computes the same few tasks (after one untimed), its data already
there (moved ahead for a node that cannot see it, no transfer while any compute is timed),
every node at once as in a run. A pass runs before each scheduler's run, so that a change in
the machine's load between the runs reaches the bound from both sides. The default run's
tasks (plain Ray placement: the baseline, never the scheduler under test) join the samples:
they compute under a run's conditions (the link busy, the scheduler beside them), and all of
it is measured before the data-aware run. Per site the mean of every sample is the compute
time of one task there: the bound is about the total compute of a run, and a few slow tasks
(the same task varies by up to 2x from run to run on a loaded machine) count in a sum.

The tasks of one run are equal in work (every image, every directory, has the same pixel
count), so one time per site stands for each task; the bound (workloads.burst.bound) takes
it with the bytes of each task and the shaped link rate.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from vocab.burst import TRANSFER_RESOURCE
from workloads.burst.inputs import TaskSpec
from workloads.burst.scheduling.base import RunSetup, Say
from workloads.burst.work import run_task, transfer


@dataclass(frozen=True)
class Calibration:
    tasks: tuple[str, ...]
    seconds: dict[str, list[float]]  # site -> every compute time measured there
    cpu_seconds: dict[str, list[float]]  # site -> the CPU its task processes used meanwhile
    passes: int = 1
    runs: tuple[str, ...] = ()  # the runs whose tasks' compute times are samples too

    @property
    def compute_s(self) -> dict[str, float]:
        """Per site: the mean compute time of one task."""
        return {site: statistics.mean(times) for site, times in self.seconds.items()}

    @property
    def compute_cpu_s(self) -> dict[str, float]:
        """Per site: the mean CPU time of one task's process (what it needs, whatever
        else the machine runs)."""
        return {site: statistics.mean(times) for site, times in self.cpu_seconds.items()}

    @staticmethod
    def from_run(name: str, records: list[dict[str, Any]]) -> Calibration:
        """A run's computed tasks as samples (a run records only the tasks it computed)."""
        seconds: dict[str, list[float]] = {}
        cpu_seconds: dict[str, list[float]] = {}
        for record in records:
            seconds.setdefault(record["site"], []).append(
                record["compute_end"] - record["compute_start"])
            if record.get("compute_cpu_s") is not None:
                cpu_seconds.setdefault(record["site"], []).append(record["compute_cpu_s"])
        return Calibration((), seconds, cpu_seconds, passes=0, runs=(name,))

    @staticmethod
    def pooled(passes: list[Calibration]) -> Calibration:
        """Several passes (one before each scheduler's run) and runs as one: every sample
        counts."""
        seconds: dict[str, list[float]] = {}
        cpu_seconds: dict[str, list[float]] = {}
        for one in passes:
            for site, times in one.seconds.items():
                seconds.setdefault(site, []).extend(times)
            for site, times in one.cpu_seconds.items():
                cpu_seconds.setdefault(site, []).extend(times)
        tasks = next((one.tasks for one in passes if one.tasks), ())
        return Calibration(tasks, seconds, cpu_seconds, sum(one.passes for one in passes),
                           tuple(name for one in passes for name in one.runs))

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": list(self.tasks),
            "passes": self.passes,
            "runs": list(self.runs),
            "compute_s": {site: round(value, 4) for site, value in self.compute_s.items()},
            "compute_cpu_s": {site: round(value, 4)
                              for site, value in self.compute_cpu_s.items()},
            "samples_s": {site: [round(t, 4) for t in times]
                          for site, times in self.seconds.items()},
            "samples_cpu_s": {site: [round(t, 4) for t in times]
                              for site, times in self.cpu_seconds.items()},
        }


def calibrate(setup: RunSetup, tasks: list[TaskSpec], count: int, say: Say) -> Calibration:
    """Each node first computes one task untimed (a worker's first compute pays for its
    first large allocations and decoders), then `count` timed ones."""
    warm, sample = tasks[0], tasks[1: count + 1] or tasks[:1]
    nodes = sorted(setup.nodes.values(), key=lambda n: (n.site, n.ip))
    say(f"[calibration] {len(nodes)} worker nodes each compute {warm.name} untimed, then "
        f"{len(sample)} tasks ({', '.join(t.name for t in sample)})")
    contexts = {  # each node stages into its own folder: two cloud nodes stage the same task
        node.node_id: replace(setup.context,
                              stage_root=str(Path(setup.context.stage_root) / f"node-{i}"))
        for i, node in enumerate(nodes)
    }

    def pinned(node_id: str) -> NodeAffinitySchedulingStrategy:
        return NodeAffinitySchedulingStrategy(node_id, soft=False)

    def computed(batch: list[TaskSpec]) -> list[dict[str, Any]]:
        """Move the batch's data to every node that cannot see it, then compute it there."""
        ray.get([
            transfer.options(resources={TRANSFER_RESOURCE: 1},
                             scheduling_strategy=pinned(n.node_id), max_retries=0)
            .remote(contexts[n.node_id], task)
            for n in nodes if not setup.context.source.visible_at(n.site)
            for task in batch
        ])
        return ray.get([
            run_task.options(num_cpus=setup.task_cpus, scheduling_strategy=pinned(n.node_id),
                             name=f"calibrate-{task.name}")
            .remote(contexts[n.node_id], setup.workload, task, False)
            for n in nodes
            for task in batch
        ])

    computed([warm])
    seconds: dict[str, list[float]] = {}
    cpu_seconds: dict[str, list[float]] = {}
    for raw in computed(sample):
        seconds.setdefault(raw["site"], []).append(raw["compute_end"] - raw["compute_start"])
        cpu_seconds.setdefault(raw["site"], []).append(raw["compute_cpu_s"])
    calibration = Calibration(tuple(t.name for t in sample), seconds, cpu_seconds)
    say("[calibration] compute per task: " + ", ".join(
        f"{site} {value:.2f}s" for site, value in sorted(calibration.compute_s.items())))
    return calibration
