"""The fallback policy's stand-ins and billing on a hand-built preemption sequence, driving
the controller's own methods without Ray (a fleet of plain slots)."""

from typing import Any

import pytest

from workloads.doll.fleet import Slot
from workloads.doll.options import DollOptions
from workloads.doll.policy_run import PolicyRun, Servers
from workloads.doll.worker import stream_start

OD, SPOT = 0.36, 0.09  # $/h


class PlainFleet:
    """Slots only: set_up records the state the controller asks for."""

    def __init__(self, workers: int) -> None:
        self.slots = [Slot(index, 1.0) for index in range(workers)]

    def set_up(self, slot: Slot, up: bool) -> None:
        slot.up = up


class Script:
    """A preemption schedule by hand: step k returns states[k]."""

    def __init__(self, states: list[list[bool]]) -> None:
        self.states = iter(states)

    def step(self) -> list[bool]:
        return next(self.states)


def controller(policy: str, states: list[list[bool]]) -> PolicyRun:
    # 1 s chain steps; a 4 s launch delay compressed 2x is 2 s; no notice ahead of a loss
    config = DollOptions(
        workers=2, k=1, refresh_s=1.0, launch_delay_s=4.0, compression=2.0, warning_s=None,
        on_demand_price=OD, policies=(policy,),
    )
    fleet: Any = PlainFleet(2)
    servers = Servers(fleet, None, None, None, mean_spot_price=SPOT)
    run = PolicyRun(policy, config, servers, say=lambda line: None)
    run.chains = Script(states)  # type: ignore[assignment]
    run.price = SPOT
    run.spot = {0, 1}
    return run


def drive(run: PolicyRun, seconds: int) -> list[list[bool]]:
    """The controller loop's order each tick: bill up to now, step the chains, apply."""
    run._apply_states(0.0)
    ups = []
    for now in range(1, seconds + 1):
        run.bill(float(now))
        run.step(float(now))
        run._apply_states(float(now))
        ups.append([slot.up for slot in run.fleet.slots])
    run.bill(float(seconds + 1))
    return ups


# worker 0 is preempted at t = 5 and returns at t = 10; worker 1 is never preempted
SCHEDULE = [[5 > t or t >= 10, True] for t in range(1, 13)]


def test_a_stand_in_takes_over_after_the_launch_delay_and_is_billed_until_spot_returns() -> None:
    run = controller("fallback", SCHEDULE)
    ups = drive(run, 12)
    worker0 = [up[0] for up in ups]  # at t = 1..12
    assert worker0 == [True] * 4 + [False, False] + [True] * 6  # stand-in runs from t = 7
    assert all(up[1] for up in ups)
    # spot: worker 0 up 0-5 and 10-13, worker 1 up 0-13 -> 21 spot-seconds;
    # the stand-in is billed from its request at 5 until spot returns at 10: 5 s on demand
    assert run.meter.spot_up_s == pytest.approx(21.0)
    assert run.meter.on_demand_s == pytest.approx(5.0)
    assert run.meter.cost == pytest.approx((21 * SPOT + 5 * OD) / 3600)
    assert not run.stand_ins
    assert [e["event"] for e in run.events] == ["preempted", "recovered", "stand-in released"]


def test_an_outage_shorter_than_the_launch_delay_never_runs_its_stand_in() -> None:
    # down at t = 5 only: asked at 5, released at 6, never up in between
    run = controller("fallback", [[t != 5, True] for t in range(1, 9)])
    ups = drive(run, 8)
    assert [up[0] for up in ups] == [True] * 4 + [False] + [True] * 3
    assert run.meter.on_demand_s == pytest.approx(1.0)
    assert run.meter.spot_up_s == pytest.approx(8.0 + 9.0)


def test_the_paper_policies_lose_the_outage_and_pay_nothing_for_it() -> None:
    run = controller("static-paper", SCHEDULE)
    ups = drive(run, 12)
    assert [up[0] for up in ups] == [True] * 4 + [False] * 5 + [True] * 3
    assert run.meter.on_demand_s == 0.0
    assert run.meter.cost == pytest.approx(21 * SPOT / 3600)


def test_fallback_needs_markov_preemption() -> None:
    with pytest.raises(ValueError, match="--policy: fallback .* --preemption markov"):
        DollOptions(policies=("fallback",), preemption="kill")


def test_a_kept_stream_is_read_on_where_it_stopped_and_a_dropped_one_loses_the_outage() -> None:
    # the first batch starts when the worker comes up, backlog or not
    assert stream_start(0.0, 5.0, keep_backlog=True) == (5.0, 0.0)
    assert stream_start(0.0, 5.0, keep_backlog=False) == (5.0, 0.0)
    # preempted during that first batch (clock = 5), up again at 9
    assert stream_start(5.0, 9.0, keep_backlog=True) == (5.0, 0.0)
    assert stream_start(5.0, 9.0, keep_backlog=False) == (9.0, 4.0)
    # a batch after one that ended at 10, the worker up since 3: nothing skipped either way
    assert stream_start(10.0, 3.0, keep_backlog=False) == (10.0, 0.0)
    assert stream_start(10.0, 3.0, keep_backlog=True) == (10.0, 0.0)
