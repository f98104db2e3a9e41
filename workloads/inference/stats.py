"""Per-job numbers: query rate over a sliding window and latency statistics with true
percentiles (the original sorted descending, so its "p90" was p10)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PERCENTILES = (50, 90, 95, 99)


def latency_stats(latencies_s: Sequence[float]) -> dict[str, float | None]:
    """Mean, std, median, p90, p95, p99 of per-query latencies, in milliseconds."""
    if not latencies_s:
        return {"mean_ms": None, "std_ms": None, "median_ms": None, "p90_ms": None,
                "p95_ms": None, "p99_ms": None}
    values = np.asarray(latencies_s, dtype=float) * 1000.0
    p50, p90, p95, p99 = (float(v) for v in np.percentile(values, PERCENTILES))
    return {"mean_ms": float(values.mean()), "std_ms": float(values.std()), "median_ms": p50,
            "p90_ms": p90, "p95_ms": p95, "p99_ms": p99}


def window_rate(completions: Sequence[tuple[float, int]], now: float, window_s: float,
                started_at: float) -> float:
    """Queries per second over the last `window_s` (or since `started_at` if the job has run
    for less), from (time, queries) completion events."""
    span = min(window_s, now - started_at)
    if span <= 0:
        return 0.0
    since = now - span
    return sum(count for at, count in completions if at > since) / span


def window_cost(completions: Sequence[tuple[float, int, float]], now: float,
                window_s: float) -> float | None:
    """Worker-seconds per query over the last `window_s`, from (time, queries, busy seconds)
    events; None before the first completion in the window."""
    queries = busy = 0.0
    for at, count, seconds in completions:
        if at > now - window_s:
            queries += count
            busy += seconds
    return busy / queries if queries else None


def spread(rates: Sequence[float]) -> float | None:
    """max/min of the rates (1.0 is perfectly fair); None if a rate is zero or absent."""
    if len(rates) < 2 or min(rates) <= 0:
        return None
    return max(rates) / min(rates)
