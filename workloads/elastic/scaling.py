"""The original's worker-count rule (AdaptDL on Ray AWS), on throughput measured on the run
itself (pure: no Ray).

The run uses the largest worker count n whose throughput per worker stays at least half the
single-worker throughput, and leaves its current count only for a choice at least 1.05×
better. Throughput is steps per second (a step is one synchronous update of the run's
global batch), measured per worker count from the run's own steps.

Counts not measured yet are predicted to scale perfectly from the nearest measured count
below (or above), so the run grows into capacity it has not tried and stops growing past a
count it measured as inefficient. Without a run on one worker, the single-worker throughput
is taken as the best per-worker throughput measured (a lower bound of it, as data-parallel
scaling is sublinear). With nothing measured yet: every worker that fits.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

EFFICIENCY_FLOOR = 0.5
"""Throughput per worker must stay at least this fraction of the single-worker throughput."""
SWITCH_GAIN = 1.05
"""Leave the current worker count only for a predicted throughput this much higher."""
WARMUP_STEPS = 3
"""Steps at the start of each worker group left out of its measurement (process-group
set-up, first allocations)."""
MIN_MEASURED_STEPS = 5
"""Intervals between steps a worker group needs before its throughput counts."""


def measured_throughput(steps: Iterable[Mapping[str, Any]]) -> dict[int, float]:
    """Steps per second per worker count: each worker group's steps after its first
    WARMUP_STEPS, (steps − 1) / (last − first), pooled over the groups of the same size."""
    by_attempt: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for row in steps:
        by_attempt[row["attempt"]].append(row)
    intervals: dict[int, int] = defaultdict(int)
    seconds: dict[int, float] = defaultdict(float)
    for rows in by_attempt.values():
        rows = sorted(rows, key=lambda row: row["t"])[WARMUP_STEPS:]
        if len(rows) - 1 < MIN_MEASURED_STEPS or rows[-1]["t"] <= rows[0]["t"]:
            continue
        size = int(rows[0]["world_size"])
        intervals[size] += len(rows) - 1
        seconds[size] += rows[-1]["t"] - rows[0]["t"]
    return {size: intervals[size] / seconds[size] for size in intervals}


def predicted_throughput(throughput: Mapping[int, float], workers: int) -> float:
    """Measured, else perfect scaling from the nearest measured count below (else above)."""
    if workers in throughput:
        return throughput[workers]
    below = [n for n in throughput if n < workers]
    nearest = max(below) if below else min(throughput)
    return throughput[nearest] * workers / nearest


def choose_workers(throughput: Mapping[int, float], current: int | None, fit: int,
                   low: int, high: int) -> int:
    """The worker count to run with: `fit` workers fit now, between `low` and `high`;
    `current` is the count running (or that ran before a restart)."""
    top = min(fit, high)
    if top < low or not throughput:
        return top
    single = throughput.get(1) or max(value / n for n, value in throughput.items())

    def eligible(workers: int) -> bool:
        return predicted_throughput(throughput, workers) / workers >= EFFICIENCY_FLOOR * single

    best = max((n for n in range(low, top + 1) if eligible(n)), default=low)
    if current is None or current == best or not low <= current <= top or not eligible(current):
        return best
    gain = predicted_throughput(throughput, best) / predicted_throughput(throughput, current)
    return best if gain >= SWITCH_GAIN else current
