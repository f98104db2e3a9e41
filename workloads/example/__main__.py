"""`python -m workloads.example --help`: the run, on whatever Ray this process reaches."""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import numpy as np
import ray

from workloads.common.provenance import provenance
from workloads.common.ray_session import ray_session
from workloads.common.results import ResultsWriter
from workloads.example.options import EXAMPLE_SPEC, ExampleOptions


@ray.remote(num_cpus=1)
def count_inside(seed: int, samples: int) -> int:
    """How many of `samples` random points of the unit square fall in the quarter circle."""
    points = np.random.default_rng(seed).random((samples, 2))
    return int(np.count_nonzero((points**2).sum(axis=1) <= 1.0))


def run(options: ExampleOptions) -> int:
    writer = ResultsWriter("example", options.out, options.s3_endpoint)
    started = time.time()
    with ray_session():
        pending = {count_inside.remote(options.seed + i, options.samples): i
                   for i in range(options.tasks)}
        rows: list[dict[str, Any]] = []
        while pending:  # a progress line per task done: the run tasks watch for progress
            [done], _ = ray.wait(list(pending))
            rows.append({"task": pending.pop(done), "inside": ray.get(done),
                         "t": time.time() - started})
            print(f"example: task {len(rows)}/{options.tasks} done", flush=True)
    inside = sum(row["inside"] for row in rows)
    estimate = 4.0 * inside / (options.tasks * options.samples)
    summary = {"pi": estimate, "abs_error": abs(estimate - math.pi), "tasks": options.tasks,
               "points": options.tasks * options.samples, "seconds": time.time() - started,
               "target": options.target}
    writer.add_records("tasks", sorted(rows, key=lambda row: row["task"]))
    writer.finish(summary, provenance(options.parameters(), {}, options.target,
                                      {"seed": options.seed}), to_log=options.results_to_log)
    print(f"example: π ≈ {estimate:.5f}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    return EXAMPLE_SPEC.main(argv, run)


if __name__ == "__main__":
    sys.exit(main())
