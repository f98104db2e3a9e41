"""Chance-constrained spot sizing: the probability that an allocation meets its deadline
under the paper's two-state Markov preemption model, and the largest spot share that keeps
it at or above a target (0.9 by default).

The points that arrive by the deadline are Σλᵢ·T minus, for each spot worker, λᵢ times its
down time. A worker's down time over n chain steps has a mean and a variance we compute
exactly from the chain (the steps are strongly correlated: a preemption lasts ~50 steps at
α = 0.9); arrivals are Poisson, so their count adds its own variance. The sum over workers
is taken as normal (tests/workloads/test_doll_chance.py checks this against the exact
distribution). The run also needs a few points beyond J·B: each worker ends with a partial
batch (B/2 on average), up to K−1 ready batches wait for the next update, and a
preemption drops the partial batch the worker held (B/2 each).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from workloads.common.spot_market.preemption import STEPS_SCALE
from workloads.doll.allocation import Spot, cheapest_spot_set, expected_cost, spot_shares

DEFAULT_TARGET = 0.9


@dataclass(frozen=True)
class OutageChain:
    """One worker's preemption chain: per step, up→down with `p_down`, down→up with `p_up`;
    one step lasts `step_s` seconds."""

    p_down: float
    p_up: float
    step_s: float

    @classmethod
    def paper(cls, alpha: float, step_s: float) -> OutageChain:
        """The paper's chain: 1/(α·500) and 1/((1−α)·500); α = 1 is never preempted."""
        if alpha >= 1.0:
            return cls(0.0, 1.0, step_s)
        return cls(1.0 / (alpha * STEPS_SCALE), 1.0 / ((1.0 - alpha) * STEPS_SCALE), step_s)

    def down_steps(self, steps: int, down_now: bool) -> tuple[float, float]:
        """Mean and variance of the number of down steps among the next `steps` steps."""
        return _down_moments(self.p_down, self.p_up, steps, down_now)

    def backlog_steps(self, launch_steps: int) -> tuple[float, float]:
        """Mean and variance of the steps of data a worker still owes at a given moment
        when outages keep their data and a stand-in catches up `launch_steps` after the
        preemption: the outage's age a if it is younger than that, else 0. In the stationary
        chain an outage of age a is under way with probability α·p_down·(1 − p_up)^(a−1)."""
        if launch_steps <= 1 or self.p_down <= 0.0:
            return 0.0, 0.0
        alpha = self.p_up / (self.p_down + self.p_up)
        age = np.arange(1, launch_steps, dtype=float)
        chance = alpha * self.p_down * (1.0 - self.p_up) ** (age - 1.0)
        mean = float(np.sum(age * chance))
        return mean, max(float(np.sum(age * age * chance)) - mean * mean, 0.0)

    def preemptions(self, steps: int, down_now: bool) -> float:
        """Expected up→down transitions in the next `steps` steps."""
        mean, _ = self.down_steps(steps, down_now)
        return (steps - mean) * self.p_down


@lru_cache(maxsize=4096)
def _down_moments(p_down: float, p_up: float, steps: int, down_now: bool) -> tuple[float, float]:
    """Xₜ = 1 when down at step t (t = 1..n), X₀ given. With π = p_down/(p_down+p_up) and
    ρ = 1 − p_down − p_up: P(Xₜ=1) = mₜ = π + (X₀ − π)ρᵗ and P(Xₜ=1 | Xᵤ=1) =
    π + (1−π)ρᵗ⁻ᵘ, so E[D] = Σmₜ and E[D²] = Σmₜ + 2Σᵤ mᵤ Σₜ₌ᵤ₊₁ⁿ (π + (1−π)ρᵗ⁻ᵘ)."""
    if steps <= 0:
        return 0.0, 0.0
    if p_down <= 0.0:
        return _absorbing(p_up, steps, down_now)
    pi = p_down / (p_down + p_up)
    rho = 1.0 - p_down - p_up
    t = np.arange(1, steps + 1, dtype=float)
    m = pi + ((1.0 if down_now else 0.0) - pi) * rho**t
    after = steps - t  # later steps than u
    if abs(1.0 - rho) < 1e-15:
        geometric = after
    else:
        geometric = rho * (1.0 - rho**after) / (1.0 - rho)
    second = float(m.sum()) + 2.0 * float(np.sum(m * (pi * after + (1.0 - pi) * geometric)))
    mean = float(m.sum())
    return mean, max(second - mean * mean, 0.0)


def _absorbing(p_up: float, steps: int, down_now: bool) -> tuple[float, float]:
    """Never preempted (p_down = 0): no down time, except while a current outage lasts
    (geometric with success p_up, truncated at `steps`)."""
    if not down_now:
        return 0.0, 0.0
    t = np.arange(1, steps + 1, dtype=float)
    survive = (1.0 - p_up) ** t  # still down at step t
    mean = float(survive.sum())
    # E[D²] = Σₜ P(D ≥ t)(2t − 1) for D = number of down steps
    second = float(np.sum(survive * (2.0 * t - 1.0)))
    return mean, max(second - mean * mean, 0.0)


def batch_overhead_points(workers: int, batch_size: int, k: int) -> float:
    """Points that arrive but are not processed by the time J batches are: half a batch
    per worker in progress and half of the K−1 batches that may wait for an update."""
    return batch_size * (workers / 2.0 + (k - 1) / 2.0)


@dataclass(frozen=True)
class ChanceModel:
    """What the deadline probability needs besides the allocation."""

    chain: OutageChain
    batch_size: int
    k: int
    target: float = DEFAULT_TARGET
    launch_steps: int | None = None
    """None: an outage loses its data (the paper); a number: it keeps it and a stand-in
    catches up this many steps after the preemption (the `fallback` extension)."""


def arrivals_moments(
    rates: Sequence[float],
    spot: Spot,
    horizon_s: float,
    model: ChanceModel,
    down_now: Sequence[bool] | None = None,
) -> tuple[float, float]:
    """Mean and variance of the points that arrive (and are kept) within `horizon_s`. A
    spot share s of a stream loses s·λ per down second (Poisson thinning), so its outage
    term scales by s in the mean and s² in the variance; each spot piece batches on its
    own and loses half a batch per preemption whatever its share."""
    steps = max(int(horizon_s / model.chain.step_s), 0)
    mean = sum(rates) * horizon_s
    variance = mean  # Poisson arrivals
    step_s = model.chain.step_s
    for index, share in spot_shares(spot).items():
        down = bool(down_now[index]) if down_now is not None else False
        if model.launch_steps is None:
            down_mean, down_var = model.chain.down_steps(steps, down)
            lost = model.chain.preemptions(steps, down) * model.batch_size / 2.0
        else:
            down_mean, down_var = model.chain.backlog_steps(model.launch_steps)
            lost = 0.0
        rate = rates[index] * share
        mean -= lost + rate * step_s * down_mean
        variance += (rate * step_s) ** 2 * down_var - rate * step_s * down_mean
    return mean, max(variance, 0.0)


def deadline_probability(
    rates: Sequence[float],
    spot: Spot,
    work: float,
    horizon_s: float,
    model: ChanceModel,
    down_now: Sequence[bool] | None = None,
    from_start: bool = True,
) -> float:
    """P(the points kept within `horizon_s` reach `work`, normal approximation. From the
    start of a run the batch overhead is added; mid-run the points already held in partial
    and waiting batches make up for the same overhead at the end."""
    if horizon_s <= 0:
        return 0.0 if work > 0 else 1.0
    need = work
    if from_start:
        need += batch_overhead_points(len(rates), model.batch_size, model.k)
    mean, variance = arrivals_moments(rates, spot, horizon_s, model, down_now)
    if variance <= 0:
        return 1.0 if mean >= need else 0.0
    return 0.5 * math.erfc((need - mean) / math.sqrt(2.0 * variance))


def chance_spot_set(
    rates: Sequence[float],
    work: float,
    horizon_s: float,
    model: ChanceModel,
    spot_price: float,
    on_demand_price: float,
    alpha: float,
    down_now: Sequence[bool] | None = None,
    from_start: bool = True,
) -> list[int]:
    """Make the slowest workers spot, one at a time (equal rates: in index order), while
    the deadline probability stays ≥ the target and the expected cost keeps falling. None
    when spot is not cheaper or the deadline is gone."""
    if spot_price >= on_demand_price or horizon_s <= 0:
        return []
    chosen = cheapest_spot_set(
        rates,
        lambda spot: deadline_probability(
            rates, spot, work, horizon_s, model, down_now, from_start
        ) >= model.target,
        lambda spot: expected_cost(rates, spot, work, alpha, spot_price, on_demand_price),
    )
    return sorted(chosen)


SHARE_TOLERANCE = 1e-4


def largest_share(probability_at: Callable[[float], float], target: float) -> float:
    """The largest share s in [0, 1] with probability_at(s) ≥ target, for a probability that
    falls as s grows (bisection to SHARE_TOLERANCE; 0 when even a sliver misses)."""
    if probability_at(1.0) >= target:
        return 1.0
    low, high = 0.0, 1.0
    while high - low > SHARE_TOLERANCE:
        middle = (low + high) / 2.0
        if probability_at(middle) >= target:
            low = middle
        else:
            high = middle
    return low


SPLITS = ("whole", "one", "even")
"""How finely a chance-constrained plan may split the spot share: whole workers only; whole
workers plus one worker's stream split between spot and on-demand; or the same share of
every worker's stream on spot."""


def chance_spot_shares(
    rates: Sequence[float],
    work: float,
    horizon_s: float,
    model: ChanceModel,
    spot_price: float,
    on_demand_price: float,
    alpha: float,
    split: str,
    down_now: Sequence[bool] | None = None,
    from_start: bool = True,
) -> dict[int, float]:
    """The largest spot share with P(deadline) ≥ the target, split as `split` says (see
    SPLITS), as worker → share. Empty when spot is not cheaper or the deadline is gone."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    whole = chance_spot_set(
        rates, work, horizon_s, model, spot_price, on_demand_price, alpha, down_now, from_start
    )
    if not whole and (spot_price >= on_demand_price or horizon_s <= 0):
        return {}

    def probability(spot: dict[int, float]) -> float:
        return deadline_probability(rates, spot, work, horizon_s, model, down_now, from_start)

    if split == "whole":
        return spot_shares(whole)
    if split == "even":
        share = largest_share(
            lambda s: probability({i: s for i in range(len(rates))}), model.target
        )
        return {i: share for i in range(len(rates))} if share > 0 else {}
    chosen = spot_shares(whole)
    rest = sorted((i for i in range(len(rates)) if i not in chosen), key=lambda i: rates[i])
    if rest:
        share = largest_share(lambda s: probability({**chosen, rest[0]: s}), model.target)
        cost = expected_cost(rates, chosen, work, alpha, spot_price, on_demand_price)
        candidate = {**chosen, rest[0]: share}
        if share > 0 and (
            expected_cost(rates, candidate, work, alpha, spot_price, on_demand_price) < cost
        ):
            chosen = candidate
    return chosen
