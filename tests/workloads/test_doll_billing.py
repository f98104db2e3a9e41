import pytest

from workloads.common.billing import Meter
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
