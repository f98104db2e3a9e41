"""The price server: the trace replayed in wall-clock time, compressed and looped."""

from __future__ import annotations

import ray

from workloads.common.spot_market.trace import PriceTrace, TraceReplay


@ray.remote
class PriceServer:
    def __init__(self, trace: PriceTrace, compression: float) -> None:
        self.replay = TraceReplay(trace, compression)

    async def price_at(self, wall_s: float) -> float:
        return self.replay.price_at(wall_s)

    async def changes_between(self, start_s: float, end_s: float) -> list[tuple[float, float]]:
        return self.replay.changes_between(start_s, end_s)
