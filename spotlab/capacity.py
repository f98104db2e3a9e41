"""When spot capacity is there, per spot slot, time-compressed and seeded.

`markov`: the DOLL paper's two-state chain per slot (spot_market.preemption), one step every
refresh; a slot is preempted when its chain goes down and may be refilled once it is up again;
α = 1 means never preempted (then only `spotlab.lab.interrupt` preempts).
`trace`: a spot price trace replayed with a bid; every slot is preempted while the price is
above the bid (one zone, one price) and refilled once it is not.
"""

from __future__ import annotations

from spotlab.config import SpotLabConfig
from workloads.common.spot_market.preemption import MarkovAvailability
from workloads.common.spot_market.trace import TraceReplay


class SpotCapacity:
    """`available(t)`: per slot, whether spot capacity is there at lab time t (seconds since
    the lab came up); `price(t)`: the spot price then ($/h)."""

    def __init__(self, config: SpotLabConfig) -> None:
        self.config = config
        self.replay = TraceReplay(config.price_trace(), config.trace_compression)
        self._chains = MarkovAvailability(config.spot, config.alpha, config.seed)
        self._steps = 0
        self._up = [True] * config.spot

    def available(self, lab_s: float) -> list[bool]:
        if self.config.preemption_model == "trace":
            assert self.config.bid is not None
            return [self.price(lab_s) <= self.config.bid] * self.config.spot
        if self.config.alpha >= 1.0:  # availability 1: never preempted
            return [True] * self.config.spot
        due = int(lab_s // self.config.refresh_s)
        while self._steps < due:  # every refresh, missed ones too: the schedule is the seed's
            self._up = self._chains.step()
            self._steps += 1
        return list(self._up)

    def price(self, lab_s: float) -> float:
        return self.replay.price_at(lab_s)
