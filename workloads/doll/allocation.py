"""Which workers run on spot: the paper's allocation formulas, its cost bound, and the cost
ratio an allocation predicts.

`work` is the data still to be processed, in points (J·B); rates are points/s per worker.
A spot worker is up a fraction α of the time and pays the spot price only while up; an
on-demand worker is always up and always pays.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

TOLERANCE = 1e-9

Spot = Sequence[int] | Mapping[int, float]
"""The spot allocation: whole workers by index, or a share in [0, 1] of each worker's
stream (a share s: s·λ of the stream on a spot instance of s of a worker's size, the rest
on an on-demand one; billed in proportion)."""


def spot_shares(spot: Spot) -> dict[int, float]:
    """Worker index → spot share (1.0 for every whole worker given by index)."""
    if isinstance(spot, Mapping):
        return {index: float(share) for index, share in spot.items() if share > 0.0}
    return {index: 1.0 for index in spot}


def spot_rate_limit(rates: Sequence[float], work: float, deadline_s: float, alpha: float) -> float:
    """The largest total spot rate whose expected throughput Σλ − (1−α)·Σλ_spot still
    processes `work` by the deadline (inf when α = 1, −inf when even all on-demand is late)."""
    spare = sum(rates) - work / deadline_s
    if spare < -TOLERANCE:
        return -math.inf
    if alpha >= 1.0:
        return math.inf
    return max(spare, 0.0) / (1.0 - alpha)


def static_spot_count(
    workers: int, rate: float, work: float, deadline_s: float, alpha: float
) -> int:
    """Homogeneous rates: NS = ⌊(N − J·B/(λ·θ)) / (1−α)⌋, between 0 and N."""
    limit = spot_rate_limit([rate] * workers, work, deadline_s, alpha)
    if limit == -math.inf:
        return 0
    if limit >= workers * rate:
        return workers
    return math.floor(limit / rate + TOLERANCE)


def expected_finish_s(rates: Sequence[float], spot: Spot, work: float, alpha: float) -> float:
    shares = spot_shares(spot)
    throughput = sum(rates) - (1.0 - alpha) * sum(rates[i] * s for i, s in shares.items())
    return math.inf if throughput <= 0 else work / throughput


def expected_cost(
    rates: Sequence[float],
    spot: Spot,
    work: float,
    alpha: float,
    spot_price: float,
    on_demand_price: float,
) -> float:
    """Expected dollars: on-demand workers pay for the whole run, spot workers for α of it
    (a share of a worker: that share of each)."""
    spot_count = sum(spot_shares(spot).values())
    hourly = (len(rates) - spot_count) * on_demand_price + alpha * spot_count * spot_price
    return hourly * expected_finish_s(rates, spot, work, alpha) / 3600.0


def cheapest_spot_set(
    rates: Sequence[float],
    feasible: Callable[[list[int]], bool],
    cost: Callable[[list[int]], float],
) -> list[int]:
    """The one greedy loop of both spot sizings: make the slowest workers spot (equal rates:
    in index order), one at a time, while the set stays feasible and its cost keeps
    falling."""
    chosen: list[int] = []
    best = cost(chosen)
    for index in sorted(range(len(rates)), key=lambda i: rates[i]):
        candidate = [*chosen, index]
        if not feasible(candidate):
            break
        candidate_cost = cost(candidate)
        if candidate_cost >= best:
            break
        chosen, best = candidate, candidate_cost
    return chosen


def greedy_spot_set(
    rates: Sequence[float],
    work: float,
    deadline_s: float,
    alpha: float,
    spot_price: float,
    on_demand_price: float,
) -> list[int]:
    """Heterogeneous rates: the cheapest spot set whose expected total spot rate stays
    within the limit."""
    limit = spot_rate_limit(rates, work, deadline_s, alpha)
    return cheapest_spot_set(
        rates,
        lambda spot: sum(rates[i] for i in spot) <= limit + TOLERANCE,
        lambda spot: expected_cost(rates, spot, work, alpha, spot_price, on_demand_price),
    )


def allocate(
    rates: Sequence[float],
    work: float,
    deadline_s: float,
    alpha: float,
    spot_price: float,
    on_demand_price: float,
) -> list[int]:
    """The spot workers: none when spot is not cheaper, the NS formula for equal rates
    (the first NS workers), the greedy choice otherwise."""
    if spot_price >= on_demand_price or deadline_s <= 0:
        return []
    if max(rates) - min(rates) <= TOLERANCE * max(rates):
        return list(range(static_spot_count(len(rates), rates[0], work, deadline_s, alpha)))
    return sorted(greedy_spot_set(rates, work, deadline_s, alpha, spot_price, on_demand_price))


def cost_bound(deadline_factor: float, alpha: float, mean_spot: float, on_demand: float) -> float:
    """The paper's continuous bound on the cost ratio to all-on-demand:
    max(θ/θ₀ + (α·p̄s − p_od)(θ/θ₀ − 1)/((1−α)·p_od), p̄s/p_od)."""
    if alpha >= 1.0:
        return mean_spot / on_demand
    mixed = deadline_factor + (alpha * mean_spot - on_demand) * (deadline_factor - 1.0) / (
        (1.0 - alpha) * on_demand
    )
    return max(mixed, mean_spot / on_demand)


def predicted_cost_ratio(
    rates: Sequence[float],
    spot_count: float,
    spot_rate: float,
    alpha: float,
    mean_spot: float,
    on_demand: float,
) -> float:
    """The cost ratio to all-on-demand that `spot_count` spot workers with total rate
    `spot_rate` predict (fractional values: an allocation averaged over time)."""
    total_rate = sum(rates)
    throughput = total_rate - (1.0 - alpha) * spot_rate
    hourly = (len(rates) - spot_count) * on_demand + alpha * spot_count * mean_spot
    return (hourly / throughput) / (len(rates) * on_demand / total_rate)
