"""The one billing meter of every spot workload (and of the spot lab's nodes).

On-demand nodes pay a flat hourly price all the time; spot nodes pay the current spot price
(from a trace, or a fixed price) only while they are up. The caller charges each interval at
the counts that held over it; the meter also integrates node-time, so a workload can report
node-seconds, the mean number of spot nodes and the observed availability α̂ = up / spot time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Meter:
    on_demand_price: float
    """$ per on-demand node-hour."""
    cost: float = 0.0
    billed_to: float = 0.0
    on_demand_s: float = 0.0  # ∫ on-demand nodes dt (node-seconds)
    spot_s: float = 0.0  # ∫ spot nodes (up or not) dt
    spot_up_s: float = 0.0  # ∫ spot nodes up dt (the billed spot node-seconds)
    spot_rate_s: float = 0.0  # ∫ Σ arrival rates of spot nodes dt (DOLL's λ-weighted time)

    def __post_init__(self) -> None:
        if self.on_demand_price < 0:
            raise ValueError(f"on_demand_price must be >= 0, got {self.on_demand_price}")

    def charge_until(
        self,
        until: float,
        on_demand: int,
        spot: int,
        spot_up: int,
        spot_price: float,
        spot_rate: float = 0.0,
    ) -> None:
        """Charge (billed_to, until] at these counts and spot price, constant over it.
        Times are seconds on any clock the caller keeps; an empty or past interval is a no-op."""
        if on_demand < 0 or spot_up < 0 or spot_up > spot:  # spot >= spot_up >= 0
            raise ValueError(f"counts must be >= 0 with spot_up <= spot, got on_demand="
                             f"{on_demand}, spot={spot}, spot_up={spot_up}")
        span = until - self.billed_to
        if span <= 0:
            return
        hourly = on_demand * self.on_demand_price + spot_up * spot_price
        self.cost += hourly * span / 3600.0
        self.on_demand_s += on_demand * span
        self.spot_s += spot * span
        self.spot_up_s += spot_up * span
        self.spot_rate_s += spot_rate * span
        self.billed_to = until

    @property
    def observed_alpha(self) -> float:
        """Up time / spot time so far (1 before any spot time)."""
        return self.spot_up_s / self.spot_s if self.spot_s > 0 else 1.0
