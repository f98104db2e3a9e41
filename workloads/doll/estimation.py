"""The adaptive policy's rate estimates: λ̂ = arrivals / up time, per worker or pooled."""

from __future__ import annotations

from collections.abc import Sequence

MIN_UP_S_FOR_OWN_RATE = 2.0


def estimated_rates(
    stats: list[tuple[int, float] | None], homogeneous: bool, prior: float
) -> list[float]:
    """One λ̂ per worker from (arrivals, up seconds), None for a worker that did not answer.
    Homogeneous: everyone gets the pooled estimate. Otherwise a worker up long enough gets
    its own, the rest the pooled one. With no up time at all, the prior."""
    if None not in stats:
        arrivals, ups = zip(*stats, strict=True) if stats else ((), ())
        return rates_of_all(arrivals, ups, homogeneous, prior)
    answered = [s for s in stats if s is not None]
    pooled = pooled_rate([n for n, _ in answered], [up for _, up in answered], prior)
    if homogeneous:
        return [pooled] * len(stats)
    return [
        s[0] / s[1] if s is not None and s[1] >= MIN_UP_S_FOR_OWN_RATE else pooled for s in stats
    ]


def rates_of_all(arrivals: Sequence[int], ups: Sequence[float], homogeneous: bool,
                 prior: float) -> list[float]:
    """`estimated_rates` when every worker answered: their arrivals and up seconds."""
    pooled = pooled_rate(arrivals, ups, prior)
    if homogeneous:
        return [pooled] * len(ups)
    return [n / up if up >= MIN_UP_S_FOR_OWN_RATE else pooled
            for n, up in zip(arrivals, ups, strict=True)]


def pooled_rate(arrivals: Sequence[int], ups: Sequence[float], prior: float) -> float:
    up_total = sum(ups)
    return sum(arrivals) / up_total if up_total > 0 else prior
