"""A DOLL allocation policy with a parameter, swept by one subclass per value: every worker on
spot while the run is at least `margin` (a fraction of the work) ahead of the straight line
to its deadline; below that, a worker keeps spot only while its instance is up and no
interruption notice came for it (a noticed worker moves on demand before its loss), and
every other worker runs on demand.

    invoke sim-doll --capacity-trace examples/doll/traces \
        --policy on-demand,examples/doll/margin.py:Margin0,examples/doll/margin.py:Margin2
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class Margin0:
    margin = 0.0

    def decide(self, state: Any) -> Iterable[int]:
        if state.spot_price >= state.on_demand_price:
            return []  # spot is not cheaper: everyone on demand
        line = state.batches_total * (state.time_s / state.deadline_s + self.margin)
        if state.batches_done >= line:
            return range(state.workers)
        return [i for i in state.spot if state.spot_up[i] and state.notice_s[i] is None]


class Margin2(Margin0):
    margin = 0.02


class Margin1(Margin0):
    margin = 0.01
