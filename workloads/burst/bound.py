"""The perfect-overlap lower bound on a makespan (reference): no schedule beats
min over the set S of tasks run in the cloud of
max(compute(not S) / on-prem capacity, compute(S) / cloud capacity, bytes(S) / bandwidth).

The minimum is taken over fractional sets (a task may be split), which can only lower it, so
the result stays a valid bound; it is then exact to solve: for any amount of cloud compute,
the fewest bytes come from the tasks with the most compute per byte.

compute(S) in the cloud may take longer or shorter than on-prem: `cloud_factor` is the cloud's
compute time per on-prem compute second (one factor for every task, as measured per site by
the calibration), so the order of the tasks by bytes per compute second stays the same.
"""

from __future__ import annotations

from collections.abc import Sequence

ITERATIONS = 100


def cloud_bytes_curve(tasks: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Breakpoints (cloud compute, least bytes) taking tasks by bytes per compute second."""
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
    onprem_slots: int,
    cloud_slots: int,
    bandwidth_bytes_s: float | None,
    cloud_factor: float = 1.0,
) -> float:
    """tasks: (on-prem compute seconds, bytes) each; bandwidth None means the link costs
    nothing; a task computes in cloud_factor times its on-prem seconds in the cloud."""
    total = sum(c for c, _ in tasks)
    if cloud_slots <= 0:
        return total / onprem_slots
    points = cloud_bytes_curve(tasks)

    def cloud_side(x: float) -> float:
        link = 0.0 if not bandwidth_bytes_s else least_bytes(points, x) / bandwidth_bytes_s
        return max(x * cloud_factor / cloud_slots, link)

    if onprem_slots <= 0:
        return cloud_side(total)
    low, high = 0.0, total
    for _ in range(ITERATIONS):
        middle = (low + high) / 2
        if (total - middle) / onprem_slots > cloud_side(middle):
            low = middle
        else:
            high = middle
    return max((total - high) / onprem_slots, cloud_side(high))
