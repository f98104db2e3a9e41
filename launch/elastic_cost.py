"""What the run cost, from the spot lab's record of it (`spotlab/config.json` and
`events.jsonl`, kept in the results folder), charged on the one billing meter
(workloads/common/spot_market/billing.Meter) exactly as the lab bills itself: on-demand
nodes (the head too) while their process lives, spot nodes from their join until they are
gone (killed at the deadline, or ended without a notice) at the lab's spot price of the
moment (the price trace replayed from the lab's start). Next to it, the same run all on
demand: every node of the lab (the spot slots on on-demand nodes) for the same wall time.

Pure: no Ray, no files; the launcher (launch/elastic.py) prices the local results folder
with it once the lab's record has landed there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spotlab.config import SpotLabConfig
from workloads.common.spot_market.billing import Meter
from workloads.common.spot_market.trace import TraceReplay


@dataclass
class _NodeSpan:
    spot: bool
    joined: float | None = None
    noticed: bool = False
    gone: float | None = None

    def up(self, at: float) -> bool:
        """Billed over the interval that starts at `at`."""
        return self.joined is not None and self.joined <= at and (self.gone is None
                                                                   or at < self.gone)


def _spans(events: list[dict[str, Any]]) -> dict[str, _NodeSpan]:
    spans: dict[str, _NodeSpan] = {}
    for event in sorted(events, key=lambda e: e["t"]):
        span = spans.setdefault(event["node"], _NodeSpan(spot=event.get("slot") is not None))
        kind = event["event"]
        if kind == "join" and span.joined is None:
            span.joined = event["t"]
        elif kind == "notice":
            span.noticed = True
        elif kind == "kill" and span.gone is None:
            span.gone = event["t"]
        elif kind == "exit" and span.gone is None and (not span.spot or not span.noticed):
            span.gone = event["t"]  # a noticed spot node is billed until its kill
    return spans


def price_run(config: SpotLabConfig, events: list[dict[str, Any]], started: float,
              ended: float) -> dict[str, Any]:
    """The run's cost over [started, ended] (unix seconds) and the all-on-demand cost of the
    same run, with both as series over the run's time for the figure."""
    spans = _spans(events)
    joins = [e["t"] for e in events if e["event"] == "join"]
    lab_up = min(joins) if joins else started  # the lab's clock: its price replay starts here
    replay = TraceReplay(config.price_trace(), config.trace_compression)
    cuts = {started, ended}
    cuts |= {e["t"] for e in events if started < e["t"] < ended}
    cuts |= {lab_up + at for at, _ in replay.changes_between(started - lab_up, ended - lab_up)}
    spot_slots = config.spot
    all_nodes = sum(1 for span in spans.values() if not span.spot and span.joined is not None)
    all_nodes += spot_slots
    meter, on_demand = Meter(config.on_demand_price), Meter(config.on_demand_price)
    meter.billed_to = on_demand.billed_to = started
    series = [{"t_run": 0.0, "cost": 0.0, "on_demand_cost": 0.0}]
    times = sorted(cuts)
    for begin, end in zip(times[:-1], times[1:], strict=True):
        up = [span for span in spans.values() if span.up(begin)]
        meter.charge_until(end, on_demand=sum(1 for s in up if not s.spot), spot=spot_slots,
                           spot_up=min(spot_slots, sum(1 for s in up if s.spot)),
                           spot_price=replay.price_at(begin - lab_up))
        on_demand.charge_until(end, on_demand=all_nodes, spot=0, spot_up=0, spot_price=0.0)
        series.append({"t_run": end - started, "cost": meter.cost,
                       "on_demand_cost": on_demand.cost})
    return {
        "cost_usd": meter.cost,
        "all_on_demand_cost_usd": on_demand.cost,
        "saving": 1.0 - meter.cost / on_demand.cost if on_demand.cost > 0 else None,
        "on_demand_node_s": meter.on_demand_s,
        "spot_up_node_s": meter.spot_up_s,
        "observed_spot_alpha": meter.observed_alpha,
        "on_demand_price_per_h": config.on_demand_price,
        "priced_from": "spotlab/config.json and spotlab/events.jsonl (the lab's bill)",
        "series": series,
    }

