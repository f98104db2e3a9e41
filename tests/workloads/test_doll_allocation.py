import itertools

import pytest

from workloads.doll.allocation import (
    allocate,
    cost_bound,
    expected_cost,
    greedy_spot_set,
    predicted_cost_ratio,
    spot_rate_limit,
    static_spot_count,
)
from workloads.doll.trace import DEFAULT_TRACE, load_trace

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
