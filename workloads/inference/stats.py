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


def delivery(ids: Sequence[int], predictions: Sequence[int], oracle: Sequence[int],
             expected: Sequence[int] | None = None) -> dict[str, int]:
    """How a job's delivered answers (query id, prediction) meet its oracle (the labels,
    one per query id 0..N-1): ids never answered (lost), ids answered more than once
    (duplicated: each extra answer counts), ids no query has (unknown), answers that differ
    from `expected` (the model's own answer per id, when given) and answers equal to the
    label (correct)."""
    queries = len(oracle)
    seen: dict[int, int] = {}
    unknown = mismatched = correct = 0
    for query, answer in zip(ids, predictions, strict=True):
        if not 0 <= query < queries:
            unknown += 1
            continue
        seen[query] = seen.get(query, 0) + 1
        if expected is not None and answer != expected[query]:
            mismatched += 1
        if answer == oracle[query]:
            correct += 1
    return {"queries": queries, "answered": len(ids), "lost": queries - len(seen),
            "duplicated": sum(count - 1 for count in seen.values()), "unknown": unknown,
            "mismatched": mismatched, "correct": correct}


def recovery(times: Sequence[float], rates: Sequence[float], at: float,
             within: float = 0.05) -> dict[str, float | None]:
    """The query rate around a failure at `at`: its level (the last sample before), the
    dip (lowest rate after, as a fraction of the level) and the seconds until the rate is
    back within `within` of the level (None: never in the samples)."""
    before = [rate for t, rate in zip(times, rates, strict=True) if t <= at]
    after = [(t, rate) for t, rate in zip(times, rates, strict=True) if t > at]
    if not before or not after or before[-1] <= 0:
        return {"level_qps": before[-1] if before else None, "dip": None, "recovered_s": None}
    level, floor = before[-1], (1 - within) * before[-1]
    low = min(range(len(after)), key=lambda index: after[index][1])
    back: float | None = 0.0 if after[low][1] >= floor else next(
        (t - at for t, rate in after[low:] if rate >= floor), None)
    return {"level_qps": level, "dip": max(0.0, 1 - after[low][1] / level),
            "recovered_s": back}
