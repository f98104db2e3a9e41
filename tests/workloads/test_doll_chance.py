"""The chance constraint: down-time moments of the preemption chain by hand and against the
exact distribution and the simulator, and the sizing against a brute-force probability."""

import math

import numpy as np
import pytest
from scipy.stats import poisson

from workloads.common.spot_market.preemption import MarkovAvailability
from workloads.doll.allocation import static_spot_count
from workloads.doll.chance import (
    ChanceModel,
    OutageChain,
    batch_overhead_points,
    chance_spot_set,
    deadline_probability,
)

# The benchmark's defaults: 16 workers at 80 points/s, J·B = 2000·32, θ = 1.05 θ₀ = 52.5 s,
# a chain step of 0.04 s (1312 steps), α = 0.9, K = 4.
RATES = [80.0] * 16
WORK = 2000 * 32.0
DEADLINE_S = 52.5
STEP_S = 0.04
STEPS = 1312
PAPER = OutageChain.paper(0.9, STEP_S)


def exact_down_distribution(chain: OutageChain, steps: int, down_now: bool) -> np.ndarray:
    """P(D = d), d = 0..steps, by dynamic programming over (state, down steps so far)."""
    up = np.zeros(steps + 1)
    down = np.zeros(steps + 1)
    (down if down_now else up)[0] = 1.0
    for _ in range(steps):
        to_down = up * chain.p_down + down * (1.0 - chain.p_up)
        to_up = up * (1.0 - chain.p_down) + down * chain.p_up
        up = to_up
        down = np.concatenate(([0.0], to_down[:-1]))  # a down step adds one
    return up + down


def test_two_steps_by_hand() -> None:
    chain = OutageChain(p_down=0.1, p_up=0.5, step_s=1.0)
    # from up: P(X1)=0.1, P(X2)=0.1·0.5+0.9·0.1=0.14; E[D²]=0.24+2·0.1·0.5=0.34
    mean, variance = chain.down_steps(2, down_now=False)
    assert mean == pytest.approx(0.24)
    assert variance == pytest.approx(0.34 - 0.24**2)
    # from down: P(X1)=0.5, P(X2)=0.5·0.5+0.5·0.1=0.3; E[D²]=0.8+2·0.5·0.5=1.3
    mean, variance = chain.down_steps(2, down_now=True)
    assert mean == pytest.approx(0.8)
    assert variance == pytest.approx(1.3 - 0.8**2)


@pytest.mark.parametrize("down_now", [False, True])
def test_moments_equal_the_exact_distribution_over_the_whole_deadline(down_now: bool) -> None:
    distribution = exact_down_distribution(PAPER, STEPS, down_now)
    d = np.arange(STEPS + 1)
    exact_mean = float(np.sum(d * distribution))
    exact_var = float(np.sum(d * d * distribution)) - exact_mean**2
    mean, variance = PAPER.down_steps(STEPS, down_now)
    assert mean == pytest.approx(exact_mean, rel=1e-9)
    assert variance == pytest.approx(exact_var, rel=1e-6)
    # strongly correlated steps: ~90x the variance of independent ones (≈ 1312·0.1·0.9)
    assert variance > 50 * STEPS * 0.1 * 0.9


def test_moments_match_the_simulator_the_runs_use() -> None:
    chains = MarkovAvailability(400, 0.9, seed=5)
    down = np.zeros(400)
    for _ in range(STEPS):
        down += ~np.array(chains.step())
    mean, variance = PAPER.down_steps(STEPS, down_now=False)
    assert down.mean() == pytest.approx(mean, abs=4 * math.sqrt(variance / 400))
    assert down.var() == pytest.approx(variance, rel=0.3)


def brute_force_probability(spot_count: int) -> float:
    """P(deadline met) from the exact down-time distribution of `spot_count` independent
    chains (convolved) and Poisson arrivals given the up time: no normal approximation."""
    single = exact_down_distribution(PAPER, STEPS, down_now=False)
    total = np.array([1.0])
    for _ in range(spot_count):
        total = np.convolve(total, single)
    down_steps = np.arange(total.size)
    rate = RATES[0]
    arrivals_mean = sum(RATES) * DEADLINE_S - rate * STEP_S * down_steps
    preemptions = spot_count * PAPER.preemptions(STEPS, down_now=False)
    need = WORK + batch_overhead_points(16, 32, 4) + preemptions * 16
    return float(np.sum(total * poisson.sf(math.ceil(need) - 1, arrivals_mean)))


def test_normal_approximation_is_close_to_brute_force_and_sizes_the_same() -> None:
    model = ChanceModel(PAPER, batch_size=32, k=4)
    exact = {n: brute_force_probability(n) for n in range(3, 9)}
    for n, probability in exact.items():
        approx = deadline_probability(RATES, list(range(n)), WORK, DEADLINE_S, model)
        assert approx == pytest.approx(probability, abs=0.04), n
    chosen = chance_spot_set(RATES, WORK, DEADLINE_S, model, 0.159, 0.286, 0.9)
    # NS = 4 keeps P ≥ 0.9 (exact ≈ 0.94), NS = 5 would not (exact ≈ 0.81);
    # the paper's formula takes 7 (exact ≈ 0.4: its expected finish is the deadline)
    assert chosen == [0, 1, 2, 3]
    assert exact[4] >= 0.9 > exact[5]
    assert static_spot_count(16, 80.0, WORK, DEADLINE_S, 0.9) == 7
    assert exact[7] < 0.5


def test_a_longer_deadline_or_higher_alpha_allows_more_spot() -> None:
    model = ChanceModel(PAPER, batch_size=32, k=4)
    base = len(chance_spot_set(RATES, WORK, DEADLINE_S, model, 0.159, 0.286, 0.9))
    later = len(chance_spot_set(RATES, WORK, 1.1 / 1.05 * DEADLINE_S, model, 0.159, 0.286, 0.9))
    steady = ChanceModel(OutageChain.paper(0.97, STEP_S), batch_size=32, k=4)
    higher = len(chance_spot_set(RATES, WORK, DEADLINE_S, steady, 0.159, 0.286, 0.97))
    assert later > base and higher > base
    assert chance_spot_set(RATES, WORK, DEADLINE_S, model, 0.3, 0.286, 0.9) == []


def test_workers_down_now_count_against_the_remaining_time() -> None:
    model = ChanceModel(PAPER, batch_size=32, k=4)
    rates, work, horizon = [80.0] * 4, 80.0 * 4 * 9.0, 10.0
    states = [True, True, False, False]
    all_up = deadline_probability(rates, [0, 1], work, horizon, model, [False] * 4)
    two_down = deadline_probability(rates, [0, 1], work, horizon, model, states)
    assert two_down < all_up
    # the down workers made on-demand instead: only the up ones keep their risk
    assert deadline_probability(rates, [2, 3], work, horizon, model, states) == (
        pytest.approx(all_up)
    )


def test_fallback_backlog_by_hand() -> None:
    # p_down = 0.1, p_up = 0.5, α = 0.5/0.6; launch after 3 steps: ages 1 and 2 still owe
    chain = OutageChain(p_down=0.1, p_up=0.5, step_s=1.0)
    alpha = 0.5 / 0.6
    q1, q2 = alpha * 0.1, alpha * 0.1 * 0.5
    mean, variance = chain.backlog_steps(3)
    assert mean == pytest.approx(q1 + 2 * q2)
    assert variance == pytest.approx(q1 + 4 * q2 - (q1 + 2 * q2) ** 2)
    assert chain.backlog_steps(1) == (0.0, 0.0)  # a stand-in at once owes nothing
