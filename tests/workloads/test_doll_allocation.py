import itertools
import math
import random

import pytest

from workloads.common.spot_market.trace import DEFAULT_TRACE, load_trace
from workloads.doll.allocation import (
    allocate,
    cost_bound,
    expected_cost,
    expected_finish_s,
    greedy_spot_set,
    predicted_cost_ratio,
    spot_rate_limit,
    static_spot_count,
)

SUSE = load_trace(DEFAULT_TRACE, "ca-central-1b", "SUSE Linux").mean_price()
LINUX = load_trace(DEFAULT_TRACE, "ca-central-1b", "Linux/UNIX").mean_price()


@pytest.mark.parametrize(
    ("factor", "alpha", "suse", "linux"),
    [(1.05, 0.9, 0.80, 0.69), (1.05, 0.8, 0.91, 0.86), (1.1, 0.8, 0.82, 0.73)],
)
def test_cost_bound_matches_the_papers_table(
    factor: float, alpha: float, suse: float, linux: float
) -> None:
    assert cost_bound(factor, alpha, SUSE, 0.286) == pytest.approx(suse, abs=0.005)
    assert cost_bound(factor, alpha, LINUX, 0.186) == pytest.approx(linux, abs=0.005)


def test_static_formula_rounds_down_and_costs_a_little_above_the_bound() -> None:
    work = 2000 * 32
    rates = [80.0] * 16
    deadline = 1.05 * work / sum(rates)
    ns = static_spot_count(16, 80.0, work, deadline, 0.9)
    assert ns == 7  # ⌊0.476·16⌋
    expected = predicted_cost_ratio(rates, ns, ns * 80.0, 0.9, SUSE, 0.286)
    assert expected == pytest.approx(0.82, abs=0.005)
    assert expected > cost_bound(1.05, 0.9, SUSE, 0.286)


def test_greedy_equals_the_formula_for_equal_rates() -> None:
    for workers, factor, alpha in itertools.product((4, 16, 64), (1.05, 1.1), (0.8, 0.9)):
        rates = [10.0] * workers
        work = 1000.0 * workers
        deadline = factor * work / sum(rates)
        greedy = greedy_spot_set(rates, work, deadline, alpha, 0.1, 0.3)
        assert len(greedy) == static_spot_count(workers, 10.0, work, deadline, alpha)


def test_greedy_for_unequal_rates_is_feasible_and_beats_every_smaller_slow_prefix() -> None:
    rates = [3.0, 9.0, 1.0, 6.0, 2.0, 8.0, 4.0, 7.0]
    work, alpha, spot, on_demand = 4000.0, 0.8, 0.1, 0.3
    deadline = 1.1 * work / sum(rates)
    chosen = greedy_spot_set(rates, work, deadline, alpha, spot, on_demand)
    assert sum(rates[i] for i in chosen) <= spot_rate_limit(rates, work, deadline, alpha)
    assert sorted(rates[i] for i in chosen) == sorted(rates)[: len(chosen)]
    cost = expected_cost(rates, chosen, work, alpha, spot, on_demand)
    slowest = sorted(range(len(rates)), key=lambda i: rates[i])
    for size in range(len(chosen)):
        assert cost < expected_cost(rates, slowest[:size], work, alpha, spot, on_demand)


def test_no_spot_when_it_is_not_cheaper_or_the_deadline_is_gone() -> None:
    assert allocate([1.0] * 4, 10.0, 100.0, 0.9, 0.3, 0.3) == []
    assert allocate([1.0] * 4, 10.0, 0.0, 0.9, 0.1, 0.3) == []
    assert allocate([1.0] * 4, 1000.0, 10.0, 0.9, 0.1, 0.3) == []  # late even on demand
    assert allocate([1.0] * 4, 10.0, 100.0, 1.0, 0.1, 0.3) == [0, 1, 2, 3]  # never preempted


# Hand-computed values: rates points/s, work points, prices $/h.


def test_spot_rate_limit_by_hand() -> None:
    # spare = (1+2+3) - 50/10 = 1 point/s; a spot worker keeps α = 3/4 of its rate: 1/(1/4) = 4
    assert spot_rate_limit([1.0, 2.0, 3.0], 50.0, 10.0, 0.75) == 4.0
    # spare = 6 - 5.5 = 0.5 -> 2
    assert spot_rate_limit([1.0, 2.0, 3.0], 55.0, 10.0, 0.75) == 2.0
    # exactly on time with everyone on demand: no room for spot, but not late
    assert spot_rate_limit([1.0, 1.0], 20.0, 10.0, 0.5) == 0.0
    assert spot_rate_limit([1.0, 1.0], 21.0, 10.0, 0.5) == -math.inf  # late even on demand
    assert spot_rate_limit([1.0, 1.0], 10.0, 10.0, 1.0) == math.inf  # spot never preempted


def test_static_spot_count_by_hand() -> None:
    # spare = 4·1 - 30/10 = 1 -> limit 1/(1/2) = 2 spot workers, exactly
    assert static_spot_count(4, 1.0, 30.0, 10.0, 0.5) == 2
    # spare = 4·2 - 50/10 = 3 -> limit 6 points/s -> 3 workers of rate 2
    assert static_spot_count(4, 2.0, 50.0, 10.0, 0.5) == 3
    # spare = 0.6 - 0.51 = 0.09 -> limit 0.3 = one worker; in floats 0.99999…: still one
    assert static_spot_count(2, 0.3, 5.1, 10.0, 0.7) == 1
    assert static_spot_count(4, 1.0, 10.0, 10.0, 0.5) == 4  # limit 6 > all four workers
    assert static_spot_count(4, 1.0, 50.0, 10.0, 0.5) == 0  # late even on demand


def test_expected_finish_and_cost_by_hand() -> None:
    # workers 0 and 2 on spot at α = 1/2: throughput 6 - (1/2)(1+3) = 4 points/s
    assert expected_finish_s([1.0, 2.0, 3.0], [0, 2], 14400.0, 0.5) == 3600.0
    # one hour at 1 on-demand x $0.4 + 2 spot x α 0.5 x $0.1 = $0.5
    assert expected_cost([1.0, 2.0, 3.0], [0, 2], 14400.0, 0.5, 0.1, 0.4) == pytest.approx(
        0.5, rel=1e-12
    )
    # two hours at 3 on-demand workers x $0.4 (no spot)
    assert expected_cost([1.0, 2.0, 3.0], [], 43200.0, 0.5, 0.1, 0.4) == pytest.approx(
        2.4, rel=1e-12
    )
    assert expected_finish_s([0.5], [], 1.0, 0.5) == 2.0  # throughput below one point/s
    assert expected_finish_s([2.0], [0], 1.0, 0.0) == math.inf  # a spot worker never up


def test_cost_bound_by_hand() -> None:
    # 1.1 + (0.8·0.1 - 0.3)(0.1)/(0.2·0.3) = 1.1 - 0.022/0.06 = 0.7333; p̄s/p_od = 0.3333
    assert cost_bound(1.1, 0.8, 0.1, 0.3) == pytest.approx(1.1 - 0.022 / 0.06, rel=1e-12)
    # 1.5 + (0.2 - 0.3)(0.5)/(0.06) = 0.6667 < p̄s/p_od = 0.25/0.3: the spot price floor wins
    assert cost_bound(1.5, 0.8, 0.25, 0.3) == pytest.approx(0.25 / 0.3, rel=1e-12)
    assert cost_bound(1.1, 1.0, 0.1, 0.4) == pytest.approx(0.25, rel=1e-12)


def test_greedy_takes_a_worker_that_fills_the_limit_exactly() -> None:
    # spare = 8 - 60/10 = 2, α = 1/2 -> limit 4 = rates 1 + 3 exactly
    rates = [1.0, 3.0, 4.0]
    assert greedy_spot_set(rates, 60.0, 10.0, 0.5, 0.1, 0.4) == [0, 1]


def test_greedy_does_not_take_a_worker_that_leaves_the_cost_unchanged() -> None:
    # on demand: 2 x $1.0 for 14/4 h = $7; slow one on spot: ($1.0 + 0.5 x $1.5) x 14/3.5 = $7
    assert greedy_spot_set([1.0, 3.0], 14.0, 1e9, 0.5, 1.5, 1.0) == []


def test_a_single_worker_is_allocated_by_the_formula() -> None:
    # spare = 2 - 10/10 = 1, α = 1/2 -> limit 2 = the worker's rate: it goes spot
    assert allocate([2.0], 10.0, 10.0, 0.5, 0.1, 0.3) == [0]
    # the same with half a second to go: spare = 2 - 0.5/0.5 = 1 -> still spot
    assert allocate([2.0], 0.5, 0.5, 0.5, 0.1, 0.3) == [0]


def _brute_force(
    rates: list[float], work: float, deadline: float, alpha: float, spot: float, on_demand: float
) -> float:
    """The least expected cost over every spot set that meets the deadline in expectation,
    written out here from the model (not the module's functions)."""
    best = math.inf
    for size in range(len(rates) + 1):
        for chosen in itertools.combinations(range(len(rates)), size):
            up_rate = sum(rates) - (1 - alpha) * sum(rates[i] for i in chosen)
            if work / up_rate > deadline * (1 + 1e-9):
                continue
            hours = work / up_rate / 3600
            cost = hours * ((len(rates) - size) * on_demand + size * alpha * spot)
            best = min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_allocation_matches_enumeration_over_spot_sets(seed: int) -> None:
    rng = random.Random(seed)
    workers = rng.randint(2, 7)
    rates = [rng.choice([1.0, 2.0, 3.0, 5.0, 8.0]) * rng.uniform(0.9, 1.1) for _ in range(workers)]
    alpha = rng.choice([0.5, 0.7, 0.85, 0.95])
    on_demand = 0.4
    spot = rng.choice([0.1, 0.2, 0.3])
    work = 3600.0 * sum(rates)
    deadline = rng.choice([1.05, 1.2, 1.5, 2.0]) * 3600.0
    chosen = allocate(rates, work, deadline, alpha, spot, on_demand)
    assert chosen == sorted(set(chosen))
    up_rate = sum(rates) - (1 - alpha) * sum(rates[i] for i in chosen)
    assert work / up_rate <= deadline * (1 + 1e-9)
    hourly = (workers - len(chosen)) * on_demand + len(chosen) * alpha * spot
    cost = work / up_rate / 3600 * hourly
    assert cost == pytest.approx(_brute_force(rates, work, deadline, alpha, spot, on_demand))


def test_unequal_rates_are_not_treated_as_equal() -> None:
    # the slowest (rate 1) is the one to put on spot, whatever the order: limit 2 (spare 1, α 1/2)
    assert allocate([4.0, 1.0, 4.0], 80.0, 10.0, 0.5, 0.1, 0.4) == [1]
    assert allocate([1.0, 4.0, 4.0], 80.0, 10.0, 0.5, 0.1, 0.4) == [0]
