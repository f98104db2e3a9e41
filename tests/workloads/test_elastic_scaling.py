"""The seed's worker-count rule on hand-computed throughput, the throughput measured from a
run's steps, and the run's cost from a lab record on the one billing meter."""

from __future__ import annotations

import pytest

from launch.elastic_cost import price_run
from spotlab.config import SpotLabConfig
from workloads.elastic.ledger import Ledger
from workloads.elastic.scaling import choose_workers, measured_throughput

# steps/s per worker count; per worker: 10, 9, 7, 4.75; the floor is 0.5 × 10 = 5
MEASURED = {1: 10.0, 2: 18.0, 3: 21.0, 4: 19.0}


def test_largest_count_whose_per_worker_throughput_stays_above_half_of_one() -> None:
    assert choose_workers(MEASURED, current=None, fit=4, low=1, high=4) == 3
    assert choose_workers(MEASURED, current=4, fit=4, low=1, high=4) == 3  # 4 is inefficient
    assert choose_workers(MEASURED, current=None, fit=2, low=1, high=4) == 2  # what fits
    assert choose_workers(MEASURED, current=None, fit=4, low=1, high=2) == 2  # -m


def test_changes_only_for_a_five_percent_better_choice() -> None:
    assert choose_workers(MEASURED, current=2, fit=4, low=1, high=4) == 3  # 21 ≥ 1.05 × 18
    close = {1: 10.0, 2: 18.0, 3: 18.5}  # 18.5 < 18.9: stay on 2
    assert choose_workers(close, current=2, fit=3, low=1, high=3) == 2
    assert choose_workers(close, current=None, fit=3, low=1, high=3) == 3


def test_unmeasured_counts_are_tried_and_nothing_measured_takes_what_fits() -> None:
    # 3 and 4 predicted from 2 scaling perfectly (27, 36 steps/s: 9 per worker ≥ 5)
    assert choose_workers({1: 10.0, 2: 18.0}, current=2, fit=4, low=1, high=4) == 4
    # past a count measured as inefficient (2: 4 per worker < 5) nothing is tried
    assert choose_workers({1: 10.0, 2: 8.0}, current=2, fit=4, low=1, high=4) == 1
    assert choose_workers({}, current=None, fit=3, low=1, high=4) == 3
    # without one worker measured, the best per-worker throughput stands in for it (6)
    assert choose_workers({3: 18.0, 4: 10.0}, current=4, fit=4, low=1, high=4) == 3
    assert choose_workers({3: 18.0}, current=3, fit=1, low=2, high=4) == 1  # cannot run


def test_throughput_per_worker_count_from_the_run_steps() -> None:
    # attempt 0: 3 workers, a slow first step, then one every 0.5 s; attempt 1: 2 workers,
    # every 0.25 s; the first 3 steps of each group are left out; attempt 2 is too short
    steps = [{"attempt": 0, "world_size": 3, "step": s, "t": 100.0 if s == 0 else 103 + 0.5 * s}
             for s in range(12)]
    steps += [{"attempt": 1, "world_size": 2, "step": s, "t": 200.0 + 0.25 * s}
              for s in range(12, 30)]
    steps += [{"attempt": 2, "world_size": 1, "step": s, "t": 300.0 + s} for s in range(30, 36)]
    assert measured_throughput(steps) == pytest.approx({3: 2.0, 2: 4.0})


def test_cost_from_the_lab_record_on_the_one_meter() -> None:
    """Head and one on-demand node at $0.36/h all along; one spot slot up from 0 to 40 s
    (killed after its notice at 30 s), back from 70 s; the run is 0..100 s. The shipped trace
    prices spot: one price while the replay stays in its first record."""
    config = SpotLabConfig(spot=1, on_demand=1, on_demand_price=0.36, trace_compression=1.0)
    t0 = 1000.0
    events = [{"t": t0, "event": "join", "node": "head", "slot": None},
              {"t": t0, "event": "join", "node": "od-0", "slot": None},
              {"t": t0, "event": "join", "node": "spot-0", "slot": 0},
              {"t": t0 + 30, "event": "notice", "node": "spot-0", "slot": 0},
              {"t": t0 + 38, "event": "exit", "node": "spot-0", "slot": 0},
              {"t": t0 + 40, "event": "kill", "node": "spot-0", "slot": 0},
              {"t": t0 + 70, "event": "join", "node": "spot-1", "slot": 0}]
    price = config.price_trace().prices[0]
    priced = price_run(config, events, t0, t0 + 100)
    assert priced["cost_usd"] == pytest.approx((2 * 0.36 * 100 + price * 70) / 3600)
    assert priced["all_on_demand_cost_usd"] == pytest.approx(3 * 0.36 * 100 / 3600)
    assert priced["spot_up_node_s"] == pytest.approx(70)
    assert priced["observed_spot_alpha"] == pytest.approx(0.7)
    assert priced["series"][-1]["cost"] == pytest.approx(priced["cost_usd"])
    assert priced["series"][0] == {"t_run": 0.0, "cost": 0.0, "on_demand_cost": 0.0}


def test_ledger_grows_when_capacity_returns_only_once_the_group_parked() -> None:
    """The handshake the scaling policy relies on (workloads/elastic/controller.py): the
    ledger picks the count for the capacity there is, and says a running group that marks
    its steps may be resized only while it holds at a resize checkpoint taken after it
    began; a group with nothing to lose (no step marked yet, or a script that marks none)
    is resized as Ray Train does."""
    ledger = Ledger(min_workers=1, max_workers=4, handshake=True)
    ledger.group_started(2, ["a", "b"])
    ledger.begin_attempt(world_size=2, resumed_from=None)
    for step in range(20):
        ledger.add("steps", {"attempt": 0, "rank": 0, "step": step, "t": 10.0 + 0.1 * step,
                             "world_size": 2, "kind": "step"})
    assert ledger.choose_workers(2) == 2  # nothing came back: stay
    assert ledger.choose_workers(3) == 3  # a node came back: grow into it (not measured yet)
    assert [d["workers"] for d in ledger.rows["decisions"]] == [2, 3]
    assert not ledger.parked_since(5.0)
    assert ledger.resize_requested() is None and ledger.resize_requested(0) is None
    ledger.request_resize(3)  # the policy asks the running group to park first
    ledger.request_resize(4)  # once per group: the ranks act on the first
    assert ledger.resize_requested() == 3 == ledger.resize_requested(0)
    ledger.add("holds", {"attempt": 0, "step": 19, "t": 12.0, "reason": "notice"})
    assert not ledger.parked_since(5.0)  # a notice hold waits for the node to go, not a resize
    ledger.add("holds", {"attempt": 0, "step": 19, "t": 13.0, "reason": "resize"})
    assert ledger.parked_since(5.0)
    assert ledger.parked_since(13.5)  # a group begun later has marked nothing yet
    ledger.add("holds", {"attempt": 0, "step": 19, "t": 20.0, "reason": "resize",
                         "expired": True})
    assert not ledger.parked_since(5.0)  # it trains on again
    reports_only = Ledger(min_workers=1, max_workers=4, handshake=True)
    reports_only.add("steps", {"attempt": 0, "rank": 0, "step": 0, "t": 10.0, "world_size": 2,
                               "kind": "report"})
    assert reports_only.parked_since(5.0)  # an unchanged script: Ray Train's own resize
    ignoring = Ledger(min_workers=1, max_workers=4, handshake=False)
    ignoring.add("steps", {"attempt": 0, "rank": 0, "step": 0, "t": 10.0, "world_size": 2,
                           "kind": "step"})
    assert ignoring.parked_since(5.0)  # --on-notice ignore: no handshake


def test_a_running_group_is_grown_only_once_measured_and_shrunk_at_once() -> None:
    ledger = Ledger(min_workers=1, max_workers=4, handshake=True)
    ledger.group_started(2, ["a", "b"])
    ledger.begin_attempt(world_size=2, resumed_from=None)
    for step in range(5):
        ledger.add("steps", {"attempt": 0, "rank": 0, "step": step, "t": 10.0 + 0.1 * step,
                             "world_size": 2, "kind": "step"})
    assert ledger.choose_workers(4, running=True) == 2  # its own throughput unknown yet
    assert ledger.choose_workers(1, running=True) == 1  # a node died: shrink now
    assert ledger.choose_workers(4) == 4  # a restart takes what fits
    for step in range(5, 12):
        ledger.add("steps", {"attempt": 0, "rank": 0, "step": step, "t": 10.0 + 0.1 * step,
                             "world_size": 2, "kind": "step"})
    assert ledger.choose_workers(4, running=True) == 4  # measured: perfect scaling predicted
