"""The lab's schedule, known ahead: interruptions listed before they come are the ones the
clock then brings, looking ahead changes nothing, and the Markov chain is what it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotlab.capacity import Interruption, SpotCapacity
from spotlab.config import SpotLabConfig, SpotLabConfigError
from workloads.common.spot_market.preemption import MarkovAvailability
from workloads.common.spot_market.trace import DEFAULT_TRACE

CHAIN = SpotLabConfig(spot=3, alpha=0.3, refresh_s=0.1, seed=7)


def old_availability(config: SpotLabConfig, times: list[float]) -> list[list[bool]]:
    """The lab's capacity before schedules existed: the chains stepped to each time."""
    chains, steps, up, seen = MarkovAvailability(config.spot, config.alpha, config.seed), 0, \
        [True] * config.spot, []
    for t in times:
        while steps < int(t // config.refresh_s):
            up = chains.step()
            steps += 1
        seen.append(list(up))
    return seen


TIMES = [0.05 * k for k in range(1, 6000)]


def test_the_model_is_the_chain_it_was_looking_ahead_or_not() -> None:
    """With or without a look ahead (the rebalance lead), availability is step for step the
    chain the lab always had; every slot going down is one interruption listed ahead."""
    plain, ahead = SpotCapacity(CHAIN), SpotCapacity(CHAIN)
    seen, listed, looked = [], [], 0.0
    for t in TIMES:
        listed += ahead.interruptions_between(looked, t + 4.5)
        looked = t + 4.5
        seen.append(ahead.available(t))
    assert [plain.available(t) for t in TIMES] == seen == old_availability(CHAIN, TIMES)
    downs = {(int(t // CHAIN.refresh_s), slot)
             for before, after, t in zip(seen, seen[1:], TIMES[1:], strict=False)
             for slot in range(CHAIN.spot) if before[slot] and not after[slot]}
    assert len(downs) > 10
    assert {(round(i.t / CHAIN.refresh_s), i.slot) for i in listed if i.t <= TIMES[-1]} == downs


def test_availability_one_interrupts_nothing() -> None:
    capacity = SpotCapacity(SpotLabConfig(spot=2, alpha=1.0))
    assert capacity.interruptions_between(0.0, 3600.0) == []
    assert capacity.available(3600.0) == [True, True]


def test_explicit_times_interrupt_any_node_with_capacity_always_there() -> None:
    capacity = SpotCapacity(SpotLabConfig(spot=2, preemptions="at:10,10,1m"))
    assert capacity.model is None
    assert capacity.interruptions_between(0.0, 10.0) == [Interruption(10.0, None, 0),
                                                         Interruption(10.0, None, 1)]
    assert capacity.interruptions_between(10.0, 100.0) == [Interruption(60.0, None, 0)]
    assert capacity.available(30.0) == [True, True]
    assert SpotCapacity(SpotLabConfig(preemptions="none")).interruptions_between(0, 1e6) == []


def test_a_price_above_the_bid_interrupts_every_slot(tmp_path: Path) -> None:
    prices = [0.05, 0.20, 0.04, 0.30, 0.31, 0.02, 0.05]  # one an hour
    trace = tmp_path / "prices.json"
    trace.write_text(json.dumps({"SpotPriceHistory": [
        {"AvailabilityZone": "ca-central-1b", "InstanceType": "c5.xlarge",
         "ProductDescription": "SUSE Linux", "SpotPrice": str(price),
         "Timestamp": f"2026-01-01T{hour:02d}:00:00Z"} for hour, price in enumerate(prices)]}))
    capacity = SpotCapacity(SpotLabConfig(spot=2, trace=str(trace), bid=0.1,
                                          trace_compression=3600.0))  # an hour a second
    found = capacity.interruptions_between(0.0, 5.5)
    assert [(i.t, i.slot) for i in found] == [(1.0, 0), (1.0, 1), (3.0, 0), (3.0, 1)]
    assert capacity.available(1.5) == [False, False] and capacity.available(2.5) == [True, True]


@pytest.mark.parametrize(("changes", "flag"), [
    ({"preemptions": "at:5m", "trace": str(DEFAULT_TRACE), "bid": 0.1}, "--trace"),
    ({"preemptions": "none", "bid": 0.1}, "--bid"),
    ({"preemptions": "sometimes"}, "--preemptions"),
    ({"rebalance_chance": 1.5}, "--rebalance-chance"),
    ({"rebalance_lead_s": -1.0}, "--rebalance-lead"),
])
def test_schedule_settings_are_checked(changes: dict[str, object], flag: str) -> None:
    with pytest.raises(SpotLabConfigError, match=f"^{flag}"):
        SpotLabConfig(**changes)  # type: ignore[arg-type]
