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
