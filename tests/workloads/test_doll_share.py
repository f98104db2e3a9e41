"""Fractional spot shares in the chance constraint: a share of a worker's stream on spot, by
hand, against the exact distribution, and the sizing that splits one or every stream."""

import math

import numpy as np
import pytest
from scipy.stats import poisson

from tests.workloads.test_doll_chance import (
    DEADLINE_S,
    PAPER,
    RATES,
    STEP_S,
    STEPS,
    WORK,
    exact_down_distribution,
)
from workloads.doll.allocation import expected_cost, expected_finish_s, spot_shares
from workloads.doll.chance import (
    ChanceModel,
    OutageChain,
    arrivals_moments,
    batch_overhead_points,
    chance_spot_set,
    chance_spot_shares,
    deadline_probability,
    largest_share,
)

MODEL = ChanceModel(PAPER, batch_size=32, k=4)
SUSE_SPOT, SUSE_ON_DEMAND = 0.159, 0.286


def test_whole_workers_by_index_or_by_share_are_the_same_plan() -> None:
    assert spot_shares([0, 2]) == {0: 1.0, 2: 1.0}
    assert spot_shares({0: 1.0, 1: 0.0, 2: 0.25}) == {0: 1.0, 2: 0.25}
    by_index = deadline_probability(RATES, [0, 1, 2, 3], WORK, DEADLINE_S, MODEL)
    by_share = deadline_probability(RATES, dict.fromkeys(range(4), 1.0), WORK, DEADLINE_S, MODEL)
    assert by_share == by_index


def test_a_half_share_by_hand() -> None:
    # one worker, λ = 10, B = 2, half its stream on spot; two steps of 1 s from up with
    # p_down = 0.1, p_up = 0.5: E[D] = 0.24, Var[D] = 0.34 − 0.24², preemptions
    # (2 − 0.24)·0.1 = 0.176 lose B/2 = 1 point each; the down steps lose 0.5·10 per step
    chain = OutageChain(p_down=0.1, p_up=0.5, step_s=1.0)
    model = ChanceModel(chain, batch_size=2, k=1)
    mean, variance = arrivals_moments([10.0], {0: 0.5}, 2.0, model)
    assert mean == pytest.approx(20.0 - 0.176 - 5.0 * 0.24)
    assert variance == pytest.approx(20.0 - 5.0 * 0.24 + 25.0 * (0.34 - 0.24**2))


def test_expected_cost_of_shares_by_hand() -> None:
    # rates 1, 2, 3; worker 0 all spot, worker 2 half: throughput 6 − 0.5·(1 + 1.5) = 4.75,
    # 1.5 workers on spot: hourly 1.5·0.4 + 0.5·1.5·0.1 = 0.675 $/h
    shares = {0: 1.0, 2: 0.5}
    assert expected_finish_s([1.0, 2.0, 3.0], shares, 4.75 * 3600.0, 0.5) == pytest.approx(3600.0)
    cost = expected_cost([1.0, 2.0, 3.0], shares, 4.75 * 3600.0, 0.5, 0.1, 0.4)
    assert cost == pytest.approx(0.675)


def test_largest_share_by_bisection() -> None:
    assert largest_share(lambda s: 1.0 - s, 0.75) == pytest.approx(0.25, abs=1e-4)
    assert largest_share(lambda s: 1.0 - s, 0.75) <= 0.25  # never above the target's edge
    assert largest_share(lambda s: 1.0, 0.9) == 1.0
    assert largest_share(lambda s: 0.5, 0.9) == 0.0


def exact_probability(whole: int, share: float) -> float:
    """P(deadline met) for `whole` spot workers plus one with `share` of its stream on spot,
    from the exact down-time distributions and Poisson arrivals given the down time: no
    normal approximation. The split worker's share·D is rounded to whole steps (at most half
    a step, 1.6 points, against a spread of hundreds) so everything is one convolution."""
    single = exact_down_distribution(PAPER, STEPS, down_now=False)
    total = np.array([1.0])
    for _ in range(whole):
        total = np.convolve(total, single)
    split = np.bincount(np.rint(share * np.arange(single.size)).astype(int), weights=single)
    total = np.convolve(total, split)
    arrivals_mean = sum(RATES) * DEADLINE_S - RATES[0] * STEP_S * np.arange(total.size)
    preemptions = (whole + 1) * PAPER.preemptions(STEPS, down_now=False)
    need = WORK + batch_overhead_points(16, 32, 4) + preemptions * 16
    return float(np.sum(total * poisson.sf(math.ceil(need) - 1, arrivals_mean)))


def test_one_split_stream_is_sized_at_the_target_and_agrees_with_the_exact_distribution() -> None:
    shares = chance_spot_shares(
        RATES, WORK, DEADLINE_S, MODEL, SUSE_SPOT, SUSE_ON_DEMAND, 0.9, "one"
    )
    whole = chance_spot_set(RATES, WORK, DEADLINE_S, MODEL, SUSE_SPOT, SUSE_ON_DEMAND, 0.9)
    assert whole == [0, 1, 2, 3]
    assert {i: shares[i] for i in whole} == dict.fromkeys(whole, 1.0)
    split = shares[4]
    assert set(shares) == {0, 1, 2, 3, 4} and 0.3 < split < 0.5
    assert deadline_probability(RATES, shares, WORK, DEADLINE_S, MODEL) >= 0.9
    assert deadline_probability(RATES, {**shares, 4: split + 0.01}, WORK, DEADLINE_S, MODEL) < 0.9
    exact = exact_probability(4, split)
    assert exact == pytest.approx(0.9, abs=0.03)
    # the split costs less than whole workers, and the fifth whole worker was out of reach
    assert expected_cost(RATES, shares, WORK, 0.9, SUSE_SPOT, SUSE_ON_DEMAND) < expected_cost(
        RATES, whole, WORK, 0.9, SUSE_SPOT, SUSE_ON_DEMAND
    )
    assert exact_probability(4, 1.0) < 0.85


def test_every_stream_split_evenly_loses_half_a_batch_per_piece_per_preemption() -> None:
    even = chance_spot_shares(
        RATES, WORK, DEADLINE_S, MODEL, SUSE_SPOT, SUSE_ON_DEMAND, 0.9, "even"
    )
    assert set(even) == set(range(16)) and len(set(even.values())) == 1
    assert deadline_probability(RATES, even, WORK, DEADLINE_S, MODEL) >= 0.9
    one = chance_spot_shares(
        RATES, WORK, DEADLINE_S, MODEL, SUSE_SPOT, SUSE_ON_DEMAND, 0.9, "one"
    )
    # sixteen pieces lose 16 × 2.6 half-batches where one split loses 5 × 2.6: less spot
    assert 4.0 < sum(even.values()) < sum(one.values())


def test_no_spot_when_it_is_not_cheaper_and_a_bad_split_is_named() -> None:
    for split in ("whole", "one", "even"):
        assert chance_spot_shares(RATES, WORK, DEADLINE_S, MODEL, 0.3, 0.286, 0.9, split) == {}
    with pytest.raises(ValueError, match="split"):
        chance_spot_shares(RATES, WORK, DEADLINE_S, MODEL, SUSE_SPOT, SUSE_ON_DEMAND, 0.9, "x")
