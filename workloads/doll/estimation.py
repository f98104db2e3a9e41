"""The adaptive policy's rate estimates: λ̂ = arrivals / up time, per worker or pooled."""

from __future__ import annotations

MIN_UP_S_FOR_OWN_RATE = 2.0


def estimated_rates(
    stats: list[tuple[int, float] | None], homogeneous: bool, prior: float
) -> list[float]:
    """One λ̂ per worker from (arrivals, up seconds), None for a worker that did not answer.
    Homogeneous: everyone gets the pooled estimate. Otherwise a worker up long enough gets
    its own, the rest the pooled one. With no up time at all, the prior."""
    answered = [s for s in stats if s is not None]
    up_total = sum(up for _, up in answered)
    pooled = sum(n for n, _ in answered) / up_total if up_total > 0 else prior
    if homogeneous:
        return [pooled] * len(stats)
    return [
        s[0] / s[1] if s is not None and s[1] >= MIN_UP_S_FOR_OWN_RATE else pooled for s in stats
    ]
