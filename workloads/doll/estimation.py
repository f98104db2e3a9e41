"""The adaptive policy's rate estimates: λ̂ = arrivals / up time, per worker or pooled."""

from __future__ import annotations

MIN_UP_S_FOR_OWN_RATE = 2.0


def estimated_rates(
    stats: list[tuple[int, float] | None], homogeneous: bool, prior: float
) -> list[float]:
    """One λ̂ per worker from (arrivals, up seconds), None for a worker that did not answer.
    Homogeneous: everyone gets the pooled estimate. Otherwise a worker up long enough gets
    its own, the rest the pooled one. With no up time at all, the prior."""
    answered = [s for s in stats if s is not None] if None in stats else stats
    pooled = prior
    if answered:
        arrivals, ups = zip(*answered, strict=True)  # summed in the same order, without a
        up_total = sum(ups)  # generator's frames (the simulator asks at every decision)
        if up_total > 0:
            pooled = sum(arrivals) / up_total
    if homogeneous:
        return [pooled] * len(stats)
    return [
        s[0] / s[1] if s is not None and s[1] >= MIN_UP_S_FOR_OWN_RATE else pooled for s in stats
    ]
