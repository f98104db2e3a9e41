"""The meter of one run: on-demand workers pay continuously, spot workers pay the current
spot price only while up; it also integrates spot time, for α̂ and the mean allocation."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Meter:
    on_demand_price: float
    cost: float = 0.0
    billed_to: float = 0.0
    spot_s: float = 0.0  # ∫ spot workers dt
    spot_up_s: float = 0.0  # ∫ spot workers up dt
    spot_rate_s: float = 0.0  # ∫ Σλ of spot workers dt

    def charge_until(
        self,
        until: float,
        on_demand: int,
        spot: int,
        spot_up: int,
        spot_rate: float,
        spot_price: float,
    ) -> None:
        """Charge (billed_to, until] at these counts, constant over the interval."""
        span = until - self.billed_to
        if span <= 0:
            return
        hourly = on_demand * self.on_demand_price + spot_up * spot_price
        self.cost += hourly * span / 3600.0
        self.spot_s += spot * span
        self.spot_up_s += spot_up * span
        self.spot_rate_s += spot_rate * span
        self.billed_to = until

    @property
    def observed_alpha(self) -> float:
        """Up time / spot time so far (1 before any spot time)."""
        return self.spot_up_s / self.spot_s if self.spot_s > 0 else 1.0
