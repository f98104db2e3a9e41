"""A DOLL allocation policy: spot for every worker while the run is ahead of the straight
line to its deadline; once behind, only the spot instances still up stay on spot and every
other worker runs on demand until the run is ahead again.

    invoke run-doll --policy on-demand,uniform-progress,examples/doll/keep_ahead.py:KeepAhead
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class KeepAhead:
    def decide(self, state: Any) -> Iterable[int]:
        if state.spot_price >= state.on_demand_price:
            return []  # spot is not cheaper: everyone on demand
        line = state.batches_total * state.time_s / state.deadline_s
        if state.batches_done >= line:
            return range(state.workers)
        return [i for i in state.spot if state.spot_up[i]]
