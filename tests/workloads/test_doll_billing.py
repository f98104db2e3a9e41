import pytest

from workloads.common.spot_market.billing import Meter
from workloads.doll.estimation import estimated_rates


def test_on_demand_pays_always_spot_only_while_up() -> None:
    meter = Meter(on_demand_price=0.36)
    meter.charge_until(10.0, on_demand=2, spot=3, spot_up=1, spot_rate=30.0, spot_price=0.18)
    meter.charge_until(10.0, on_demand=9, spot=9, spot_up=9, spot_rate=0.0, spot_price=9.0)
    meter.charge_until(20.0, on_demand=2, spot=3, spot_up=3, spot_rate=30.0, spot_price=0.09)
    assert meter.cost == pytest.approx(
        (2 * 0.36 + 0.18) * 10 / 3600 + (2 * 0.36 + 3 * 0.09) * 10 / 3600
    )
    assert meter.observed_alpha == pytest.approx((10 + 30) / 60)
    assert meter.spot_rate_s == pytest.approx(600.0)
    assert Meter(0.3).observed_alpha == 1.0


def test_rate_estimates_pool_or_fall_back() -> None:
    stats = [(100, 1.0), (300, 3.0), None, (10, 0.5)]
    assert estimated_rates(stats, homogeneous=True, prior=7.0) == [410 / 4.5] * 4
    assert estimated_rates(stats, homogeneous=False, prior=7.0) == [
        410 / 4.5,
        100.0,
        410 / 4.5,
        410 / 4.5,
    ]
    assert estimated_rates([None, (0, 0.0)], homogeneous=True, prior=7.0) == [7.0, 7.0]


def test_a_half_second_is_billed_and_preempted_spot_workers_are_not() -> None:
    meter = Meter(on_demand_price=3.6)
    meter.charge_until(0.5, on_demand=1, spot=2, spot_up=0, spot_rate=8.0, spot_price=7.2)
    # 0.5 s of one on-demand worker at $3.6/h = $0.0005; both spot workers down: $0
    assert meter.cost == pytest.approx(0.0005, rel=1e-12)
    assert (meter.spot_s, meter.spot_up_s, meter.spot_rate_s) == (1.0, 0.0, 4.0)
    assert meter.observed_alpha == 0.0
    assert meter.billed_to == 0.5
    meter.charge_until(0.25, on_demand=9, spot=9, spot_up=9, spot_rate=9.0, spot_price=9.0)
    assert meter.cost == pytest.approx(0.0005, rel=1e-12)  # the past is not billed twice
    assert meter.billed_to == 0.5


def test_rates_by_hand_under_a_second_and_at_the_own_rate_threshold() -> None:
    # half a second of up time in all: 3 / 0.5 = 6 points/s, not the prior
    assert estimated_rates([(3, 0.5)], homogeneous=True, prior=1.0) == [6.0]
    # up exactly 2 s: own rate 10/2; the other pooled (10+0)/(2+8) = 1
    assert estimated_rates([(10, 2.0), (0, 8.0)], homogeneous=False, prior=7.0) == [5.0, 0.0]
    assert estimated_rates([(10, 1.9), None], homogeneous=False, prior=7.0) == [
        10 / 1.9,
        10 / 1.9,
    ]


def test_node_seconds_add_up_over_intervals_and_spot_rate_defaults_to_none() -> None:
    meter = Meter(on_demand_price=0.0)  # a free on-demand node (the local lab) is allowed
    meter.charge_until(10.0, on_demand=2, spot=1, spot_up=1, spot_price=0.36)
    meter.charge_until(15.0, on_demand=1, spot=0, spot_up=0, spot_price=0.36)
    # 2 nodes x 10 s + 1 node x 5 s; the spot node up 10 s at $0.36/h = $0.001
    assert meter.on_demand_s == 25.0
    assert (meter.spot_s, meter.spot_up_s) == (10.0, 10.0)
    assert meter.spot_rate_s == 0.0  # no arrival rate given: none integrated
    assert meter.cost == pytest.approx(0.001, rel=1e-12)


@pytest.mark.parametrize(
    ("on_demand", "spot", "spot_up"), [(-1, 0, 0), (0, 2, -1), (0, 1, 2), (1, -1, -1)]
)
def test_impossible_counts_are_refused_naming_them_and_bill_nothing(
    on_demand: int, spot: int, spot_up: int
) -> None:
    meter = Meter(on_demand_price=1.0)
    with pytest.raises(ValueError, match=f"got on_demand={on_demand}, spot={spot}, "
                                         f"spot_up={spot_up}$"):
        meter.charge_until(10.0, on_demand=on_demand, spot=spot, spot_up=spot_up,
                           spot_price=0.5)
    assert (meter.cost, meter.billed_to, meter.on_demand_s) == (0.0, 0.0, 0.0)


def test_a_negative_on_demand_price_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"^on_demand_price must be >= 0, got -0.1$"):
        Meter(on_demand_price=-0.1)
