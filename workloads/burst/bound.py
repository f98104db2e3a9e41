"""The perfect-overlap lower bound on a makespan (reference): no schedule beats
min over the set S of tasks run at the fetching site of
max(compute(not S) / in-place capacity, compute(S) / fetching capacity, bytes(S) / bandwidth).

The in-place site reads the inputs where they are; the fetching site's inputs cross the
shaped path: with nfs the cloud fetches (the inputs are on-prem), with s3 on-prem does (the
bucket sits at the cloud's end; workloads.burst.summary.fetching_site).

The minimum is taken over fractional sets (a task may be split), which can only lower it, so
the result stays a valid bound; it is then exact to solve: for any amount of compute at the
fetching site, the fewest bytes come from the tasks with the most compute per byte.

A task may take longer or shorter at the fetching site: `fetching_factor` is its compute
time there per in-place compute second (one factor for every task, as measured per site by
the calibration), so the order of the tasks by bytes per compute second stays the same.
"""

from __future__ import annotations

from collections.abc import Sequence

ITERATIONS = 100


def fetched_bytes_curve(tasks: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Breakpoints (fetching-site compute, least bytes) taking tasks by bytes per compute
    second."""
    ordered = sorted(tasks, key=lambda t: t[1] / t[0] if t[0] > 0 else float("inf"))
    points = [(0.0, 0.0)]
    for compute_s, nbytes in ordered:
        last_c, last_b = points[-1]
        points.append((last_c + compute_s, last_b + nbytes))
    return points


def least_bytes(points: list[tuple[float, float]], compute: float) -> float:
    for (c0, b0), (c1, b1) in zip(points, points[1:], strict=False):
        if compute <= c1:
            return b0 if c1 == c0 else b0 + (b1 - b0) * (compute - c0) / (c1 - c0)
    return points[-1][1]


def lower_bound(
    tasks: Sequence[tuple[float, float]],
    in_place_slots: int,
    fetching_slots: int,
    bandwidth_bytes_s: float | None,
    fetching_factor: float = 1.0,
) -> float:
    """tasks: (in-place compute seconds, bytes) each; bandwidth None means the fetch costs
    nothing; a task computes in fetching_factor times its in-place seconds at the fetching
    site."""
    total = sum(c for c, _ in tasks)
    if fetching_slots <= 0:
        return total / in_place_slots
    points = fetched_bytes_curve(tasks)

    def fetching_side(x: float) -> float:
        link = 0.0 if not bandwidth_bytes_s else least_bytes(points, x) / bandwidth_bytes_s
        return max(x * fetching_factor / fetching_slots, link)

    if in_place_slots <= 0:
        return fetching_side(total)
    low, high = 0.0, total
    for _ in range(ITERATIONS):
        middle = (low + high) / 2
        if (total - middle) / in_place_slots > fetching_side(middle):
            low = middle
        else:
            high = middle
    return max((total - high) / in_place_slots, fetching_side(high))
