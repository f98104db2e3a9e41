"""The simulator: the lab's engine (the same policy objects, PolicyState, schedule, billing
and deadline) driven from event to event, on hand-made traces whose outcome can be worked
out by hand; notices with a lead time; Can't Be Late's rules; start points, trace readings,
failed rows kept to their policy, and intervals that count overlapping windows once."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, fields, replace
from pathlib import Path
from typing import Any

import pytest

from workloads.common.options import OptionError
from workloads.common.spot_market.capacity import (
    CapacityTrace,
    CapacityTraceError,
    load_capacity_trace,
    spread_starts,
)
from workloads.common.spot_market.preemption import MarkovAvailability
from workloads.common.spot_market.trace import fixed_price
from workloads.doll.engine import Engine, Lookahead, PolicyFailed
from workloads.doll.options import SimOptions
from workloads.doll.policies import PolicyState
from workloads.doll.policy_run import PolicyRun
from workloads.doll.replay import ExponentialStreams, Streams, replay
from workloads.doll.sim import batch_means_interval, batches_of, simulate
from workloads.doll.stream import arrival_generator, batch_arrivals, worker_seed

OD, SPOT = 0.36, 0.09
PRICES = fixed_price(SPOT)


def job(**given: Any) -> SimOptions:
    """4 workers of 1 point/s, 2 points a batch, 10 batches: θ₀ = 5 s; 1 trace second per
    second of the run."""
    values: dict[str, Any] = dict(workers=4, rate=1.0, batch_size=2, batches=10, k=1,
                                  compression=1.0, refresh_s=1.0, on_demand_price=OD,
                                  spot_price=SPOT, warning_s=None, policies=("on-demand",))
    values.update(given)
    return SimOptions(**values)


def trace(counts: tuple[int, ...], gap_s: float = 1.0) -> CapacityTrace:
    return CapacityTrace(Path("made.json"), gap_s, counts)


def write_policy(tmp_path: Path, body: str) -> str:
    path = tmp_path / "mine.py"
    path.write_text(body)
    return f"{path}:Mine"


def test_the_lab_and_the_simulator_run_one_engine() -> None:
    assert issubclass(PolicyRun, Engine)
    outcome = replay("fallback", job(policies=("fallback",)), PRICES)
    assert type(outcome.engine) is Engine and outcome.engine.name == "fallback"


def test_the_state_a_policy_sees_is_the_dataclass_with_every_field() -> None:
    engine = Engine("fallback", job(policies=("fallback",)), trace((3, 2, 4)), 0)
    engine.update_capacity(0.0)
    engine.decided(0.0, range(4))
    state = engine.state(1.5, True, 3, (1.0, 1.0, 1.0, 1.0))
    names = [field.name for field in fields(PolicyState)]
    assert sorted(vars(state)) == sorted(names)
    assert state == PolicyState(**{name: getattr(state, name) for name in names})
    assert (state.time_s, state.batches_done, state.spot_capacity, state.spot) == \
        (1.5, 3, 3, frozenset(range(4)))
    with pytest.raises(FrozenInstanceError):
        state.time_s = 2.0  # type: ignore[misc]


def test_an_answer_given_again_is_taken_again_and_a_bad_one_still_fails() -> None:
    engine = Engine("fallback", job(policies=("fallback",)), trace((4,)), 0)
    engine.update_capacity(0.0)
    everyone = frozenset(range(4))
    for answer in (everyone, everyone, range(2), range(2), everyone):
        engine.decided(0.0, answer)
        assert engine.spot == set(answer)
    with pytest.raises(PolicyFailed, match=r"decide returned worker 4, outside range\(4\)"):
        engine.decided(0.0, range(5))
    with pytest.raises(PolicyFailed, match="decide returned True, not a worker index"):
        engine.decided(0.0, frozenset({True}))


def test_scheduled_decisions_keep_to_the_interval_grid_when_the_loop_comes_late() -> None:
    # the lab's loop sees a due decision up to a step late; the next one is still due at
    # the next multiple of --adapt-interval, not an interval after the late one
    engine = Engine("on-demand", job(adapt_interval_s=1.0))
    assert engine.next_status_s(0.0) == pytest.approx(1.0)
    assert engine.next_status_s(1.04) == pytest.approx(2.0)
    assert engine.next_status_s(2.0) == pytest.approx(3.0)
    assert engine.next_status_s(2.0 - 1e-12) == pytest.approx(3.0)  # a float's hair short
    assert Engine("on-demand", job(adapt_interval_s=0.25)).next_status_s(0.3) == \
        pytest.approx(0.5)


def test_a_run_decides_at_its_start_then_on_the_interval_grid(tmp_path: Path) -> None:
    # the decision at t = 0 is the grid's first: the loop does not take another at once (the
    # lab's would come a few milliseconds in, when a run at its start is already behind its
    # line and uniform-progress calls for on-demand where the simulator's waits)
    policy = write_policy(tmp_path, "class Mine:\n    times = ()\n"
                                    "    def decide(self, state):\n"
                                    "        self.times = (*self.times, state.time_s)\n"
                                    "        return ()\n")
    outcome = replay(policy, job(policies=(policy,), adapt_interval_s=1.0), PRICES)
    assert outcome.finish_s == pytest.approx(6.0)
    assert outcome.engine.policy.times == pytest.approx((0.0, 1.0, 2.0, 3.0, 4.0, 5.0))


def test_a_policy_whose_answer_changed_who_holds_spot_is_asked_again_at_once(
        tmp_path: Path) -> None:
    # one spot instance exists; at 2 s the policy moves both workers to spot, which leaves
    # one of them without an instance: it hears so at 2 s, not at the next event (3 s); the
    # lab does the same (Engine.asks_again)
    policy = write_policy(tmp_path, "class Mine:\n    seen = ()\n"
                                    "    def decide(self, state):\n"
                                    "        self.seen = (*self.seen, (state.time_s, "
                                    "sum(state.spot_up)))\n"
                                    "        return range(state.workers) "
                                    "if state.time_s >= 2 else ()\n")
    config = job(workers=2, batches=20, policies=(policy,), adapt_interval_s=1.0)
    outcome = replay(policy, config, PRICES, trace((1,) * 64), 0)
    assert outcome.engine.policy.seen[:5] == ((0.0, 2), (1.0, 2), (2.0, 2), (2.0, 1),
                                              (3.0, 1))


def test_the_lab_wakes_when_a_capacity_tick_begins_or_its_notice_comes_due() -> None:
    # ticks of 4 s: without a lead time the next moment is the next tick's start; with a
    # lead of 2 s, also each tick's notice 2 s before it
    ticks = trace((2, 1) * 8, gap_s=4.0)
    plain = Engine("on-demand", job(), ticks, 0)
    assert plain.next_capacity_moment_s(0.3) == pytest.approx(4.0)
    assert plain.next_capacity_moment_s(4.0) == pytest.approx(8.0)
    noticed = Engine("on-demand", job(warning_s=2.0), ticks, 0)
    assert noticed.next_capacity_moment_s(0.3) == pytest.approx(2.0)
    assert noticed.next_capacity_moment_s(2.5) == pytest.approx(4.0)
    assert noticed.next_capacity_moment_s(4.0) == pytest.approx(6.0)
    assert Engine("on-demand", job()).next_capacity_moment_s(0.3) == float("inf")


@pytest.mark.parametrize("stopping, kept", [(0, 1), (1, 2)])
def test_a_worker_that_stops_loses_the_batches_no_update_took_yet(
        stopping: int, kept: int) -> None:
    # K = 4; batches of 2 points: worker 0 (1 point/s) completes at 2 and 4 s, worker 1
    # (0.5 point/s) at 4 s; at 5 s the three wait for a fourth, and a stop loses its own
    streams = Streams([1.0, 0.5], 2, keep_backlog=False, k=4)
    streams.set_producing([True, True])
    streams.advance(5.0)
    assert streams.done == 3
    streams.set_producing([index != stopping for index in range(2)])
    assert streams.done == kept
    assert streams.lost == 3 - kept


def test_batches_an_update_took_are_not_lost_and_a_kept_stream_loses_none() -> None:
    # by 8.5 s worker 0 completed 2, 4, 6, 8 and worker 1 4, 8: the first four (2, 4, 4, 6)
    # made an update; 8 and 8 wait, one of them worker 1's
    streams = Streams([1.0, 0.5], 2, keep_backlog=False, k=4)
    streams.set_producing([True, True])
    streams.advance(8.5)
    assert streams.done == 6
    streams.set_producing([True, False])
    assert (streams.done, streams.lost) == (5, 1)
    kept = Streams([1.0, 0.5], 2, keep_backlog=True, k=4)
    kept.set_producing([True, True])
    kept.advance(5.0)
    kept.set_producing([False, False])
    assert (kept.done, kept.lost) == (3, 0)


def test_exponential_streams_lose_the_same_held_batches_by_their_own_gaps() -> None:
    # the gap draws decide when each batch completes; the newest done % K are lost with
    # their worker, whichever worker completed them
    streams = ExponentialStreams([1.0, 1.0], 2, keep_backlog=False, seed=6, k=4)
    lengths = [list(streams.lengths[i]) + [streams._length(i, a) for a in range(1, 6)]
               for i in range(2)]
    streams.set_producing([True, True])
    streams.advance(7.0)
    ends = sorted((sum(lengths[i][:n + 1]), i) for i in range(2) for n in range(6)
                  if sum(lengths[i][:n + 1]) <= 7.0)
    assert streams.done == len(ends)
    waiting = ends[len(ends) - len(ends) % 4:]
    streams.set_producing([False, True])
    assert streams.lost == sum(1 for _, index in waiting if index == 0) == 1
    assert streams.done == len(ends) - streams.lost


def test_on_demand_finishes_when_the_batches_do_and_pays_for_every_worker() -> None:
    # every worker makes a batch at 2, 4, 6 s: 10 batches need the third round
    outcome = replay("on-demand", job(), PRICES)
    assert outcome.finish_s == pytest.approx(6.0)
    assert outcome.engine.meter.cost == pytest.approx(4 * OD * 6.0 / 3600)
    assert outcome.engine.deadline_s == pytest.approx(1.05 * 5.0)


def test_exponential_arrivals_draw_each_batch_as_the_labs_workers_do() -> None:
    # one worker of 1 point/s, batches of 2, 10 batches: each batch lasts the sum of two
    # exponential gaps, so the finish is Gamma(20, 1): mean 20 s, standard deviation √20 s
    config = job(workers=1)
    finishes = [replay("on-demand", replace(config, seed=seed), PRICES,
                       arrivals="exponential").finish_s for seed in range(400)]
    mean = sum(finishes) / len(finishes)
    spread = (sum((f - mean) ** 2 for f in finishes) / (len(finishes) - 1)) ** 0.5
    assert mean == pytest.approx(20.0, abs=3 * 20 ** 0.5 / 20)  # three standard errors
    assert spread == pytest.approx(20 ** 0.5, rel=0.15)
    assert replay("on-demand", config, PRICES).finish_s == pytest.approx(20.0)  # even
    again = replay("on-demand", replace(config, seed=0), PRICES, arrivals="exponential")
    assert again.finish_s == finishes[0]  # the seed decides the draws


def test_exponential_arrivals_are_the_gaps_the_labs_worker_draws_from_the_seed() -> None:
    # one worker on demand: its J batches end when the lab's worker 0 of this seed would
    # end them, batch after batch from the generator the lab's worker draws its gaps from
    config = job(workers=1, seed=7)
    generator = arrival_generator(worker_seed(7, 0))
    lab_s = sum(float(batch_arrivals(generator, 1.0, 2)[-1]) for _ in range(10))
    outcome = replay("on-demand", config, PRICES, arrivals="exponential")
    assert outcome.finish_s == pytest.approx(lab_s, rel=1e-9)


def test_exponential_arrivals_leave_each_worker_a_partial_batch_at_the_end() -> None:
    # 16 workers, 8 points a batch, 160 batches: evenly every worker ends its tenth batch
    # at 80 s together; with exponential gaps the fleet also holds about half a batch per
    # worker unfinished when the 160th ends (the lab's parameter server finishes that much
    # after the data's mean): about 16·4 points at 16 points/s, 4 s, on average over seeds
    config = job(workers=16, batch_size=8, batches=160, k=4)
    assert replay("on-demand", config, PRICES).finish_s == pytest.approx(80.0)
    finishes = [replay("on-demand", replace(config, seed=seed), PRICES,
                       arrivals="exponential").finish_s for seed in range(200)]
    late = sum(finishes) / len(finishes) - 80.0
    assert 2.5 < late < 5.5


def test_with_exponential_arrivals_a_stopped_worker_still_loses_its_partial_batch(
        tmp_path: Path) -> None:
    # spot for 1 s of every 3 only: a batch of 2 points (2 s on average) rarely fits into
    # one up second, and with its partial batch lost at each outage the run takes cycles
    policy = write_policy(tmp_path, "class Mine:\n    def decide(self, state):\n"
                                    "        return [0]\n")
    config = job(workers=1, batches=1, policies=(policy,))
    lasted = []
    for seed in range(20):
        outcome = replay(policy, replace(config, seed=seed), PRICES, trace((1, 0, 0) * 400),
                         0, arrivals="exponential")
        engine = outcome.engine
        # up one second in every three until the batch ends inside an up second
        assert engine.meter.spot_up_s == pytest.approx(
            engine.preemptions + outcome.finish_s - 3 * engine.preemptions)
        lasted.append(engine.preemptions)
    # P(a Gamma(2, 1) batch ends within 1 s) = 1 − 2/e ≈ 0.26: most runs lose some
    assert sum(1 for count in lasted if count > 0) >= 10


def test_a_capacity_trace_takes_spot_away_and_a_preempted_batch_is_lost(tmp_path: Path) -> None:
    # one worker on spot, capacity 1 for 1 s, then none for 2 s, then 1: it collects 1 point,
    # loses it at 1 s, and starts again at 3 s: its batch of 2 ends at 5 s
    policy = write_policy(tmp_path, "class Mine:\n    def decide(self, state):\n"
                                    "        return [0]\n")
    config = job(workers=1, batches=1, policies=(policy,))
    outcome = replay(policy, config, PRICES, trace((1, 0, 0, 1, 1, 1)), 0)
    assert outcome.finish_s == pytest.approx(5.0)
    assert outcome.engine.preemptions == 1
    assert outcome.engine.meter.spot_up_s == pytest.approx(1.0 + 2.0)
    assert outcome.engine.meter.cost == pytest.approx(3.0 * SPOT / 3600)


def test_fallback_keeps_the_stream_and_its_stand_in_reads_the_backlog() -> None:
    # capacity 0 from 1 s to 3 s; the stand-in is asked at 1 s, up 1 s later (the launch
    # delay), reads what arrived meanwhile: the worker's batches end at 2 and 4 s as if
    # nothing happened
    config = job(workers=1, batches=2, policies=("fallback",), launch_delay_s=1.0)
    outcome = replay("fallback", config, PRICES, trace((1, 0, 0, 1, 1, 1)), 0)
    assert outcome.finish_s == pytest.approx(4.0)
    engine = outcome.engine
    assert engine.meter.on_demand_s == pytest.approx(2.0)  # asked at 1, released at 3
    assert engine.meter.spot_up_s == pytest.approx(2.0)


def test_a_notice_comes_its_lead_time_before_the_loss_and_the_policy_sees_it(
        tmp_path: Path) -> None:
    seen: list[Any] = []
    policy = write_policy(tmp_path, "SEEN = []\nclass Mine:\n    def decide(self, state):\n"
                                    "        SEEN.append((state.time_s, state.notice_s))\n"
                                    "        return range(state.workers)\n")
    config = job(workers=2, batches=40, warning_s=2.0, policies=(policy,))
    # capacity 2 until 4 s, then 1: worker 1 (the newest) is told at 2 s it goes at 4 s
    engine = Engine(policy, config, trace((2, 2, 2, 2, 1, 1, 1, 1, 2, 2) * 4), 0)
    engine.update_capacity(0.0)
    engine.decide_here(0.0, False, 0, None)
    for now in (1.0, 2.0, 3.0, 4.0):
        engine.step(now)
        if engine.availability_changed:
            state = engine.state(now, False, 0, None)
            seen.append((now, state.notice_s))
            engine.decided(now, range(2))
    assert seen[0] == (2.0, (None, 2.0))
    notices = [event for event in engine.events if event["event"] == "notice"]
    assert notices[0]["t"] == 2.0 and notices[0]["worker"] == 1
    assert [e["event"] for e in engine.events if e["worker"] == 1][:2] == ["notice", "preempted"]
    assert engine.preemptions == 1


def test_the_chains_ahead_give_the_same_schedule_and_say_when_a_worker_goes() -> None:
    plain = MarkovAvailability(6, 0.8, seed=3)
    ahead = Lookahead(MarkovAvailability(6, 0.8, seed=3), lead=5)
    for _ in range(400):
        expected = plain.step()
        assert ahead.step() == expected
        for worker in range(6):
            steps = ahead.steps_until_down(worker)
            if steps is not None:
                assert not ahead.future[steps - 1][worker]
                assert all(states[worker] for states in list(ahead.future)[:steps - 1])


def test_uniform_progress_moves_a_noticed_worker_on_demand_before_its_loss() -> None:
    from workloads.doll.policies import PolicyState, UniformProgress

    policy = UniformProgress(job(policies=("uniform-progress",)))
    everyone = frozenset(range(4))
    common: dict[str, Any] = dict(
        workers=4, rates=(1.0,) * 4, deadline_s=100.0, batches_total=1000, batch_size=1,
        spot_price=0.1, on_demand_price=0.3, spot_capacity=4, spot_up=(True,) * 4,
        price_changed=False, observed_rates=None, spot_s=0.0, spot_up_s=0.0)
    policy.decide(PolicyState(time_s=0.0, batches_done=0, spot=frozenset(), **common))
    behind = PolicyState(time_s=50.0, batches_done=400, spot=everyone,
                         notice_s=(None, 1.5, None, None), **common)
    assert set(policy.decide(behind)) == {0, 2, 3}


def test_cant_be_late_rules_charge_every_launch_decide_per_tick_and_end_with_the_trace(
) -> None:
    # one on-demand worker, 1 s overhead per launch (the first too): billed 1 s without
    # data, then its batches of 2 points take 2 s each
    config = job(workers=1, batches=2, rules="cant-be-late", launch_delay_s=1.0,
                 capacity_trace=(Path("made.json"),))
    outcome = replay("on-demand", config, PRICES, trace((1,) * 10), 0)
    assert outcome.finish_s == pytest.approx(5.0)
    assert outcome.engine.meter.on_demand_s == pytest.approx(5.0)
    with pytest.raises(PolicyFailed, match="capacity trace made.json ended"):
        replay("on-demand", replace(config, batches=20), PRICES, trace((1,) * 10), 0)
    with pytest.raises(OptionError, match="^--rules: cant-be-late replays a capacity trace"):
        job(rules="cant-be-late")


def test_one_clock_compresses_the_launch_delay_and_the_notice_like_the_traces() -> None:
    config = job(launch_delay_s=3600.0, warning_s=120.0, compression=2000.0,
                 capacity_trace=(Path("made.json"),))
    assert config.launch_delay_compressed_s == pytest.approx(1.8)
    assert config.warning_compressed_s == pytest.approx(0.06)
    assert replace(config, rules="cant-be-late").warning_compressed_s == 0.0
    assert "warning_s" not in replace(config, rules="cant-be-late").parameters()


def test_hours_set_the_clock_the_deadline_and_the_overhead() -> None:
    options = job(workers=1, batches=2000, batch_size=32, rate=80.0, work_hours=48.0,
                  deadline_hours=52.0, restart_overhead_hours=0.2)
    run = options.job(7)
    # θ₀ = 2000·32/80 = 800 s of the run: 48 h of trace is 216 trace seconds per second
    assert run.compression == pytest.approx(216.0)
    assert run.deadline_factor == pytest.approx(52 / 48)
    assert run.launch_delay_s == pytest.approx(720.0) and run.seed == 7
    with pytest.raises(OptionError, match="^--deadline-hours: expected at least --work-hours"):
        job(work_hours=48.0, deadline_hours=40.0)


def test_start_points_spread_over_the_trace_and_leave_room_when_it_does_not_loop() -> None:
    made = trace(tuple(range(10)))
    assert spread_starts(made, 5) == [0, 2, 4, 6, 8]
    assert spread_starts(made, 3, span_ticks=4) == [0, 2, 4]
    assert spread_starts(made, 50) == list(range(10))
    with pytest.raises(CapacityTraceError, match="fewer than the 12"):
        spread_starts(made, 2, span_ticks=12)


def test_a_trace_read_as_unavailable_is_one_instance_where_the_file_says_zero(
        tmp_path: Path) -> None:
    path = tmp_path / "us-west-2a_v100_1.json"
    path.write_text(json.dumps({"metadata": {"gap_seconds": 600}, "data": [1, 1, 0, 1, 0]}))
    assert load_capacity_trace(path).counts == (1, 1, 0, 1, 0)
    assert load_capacity_trace(path, "unavailable").counts == (0, 0, 1, 0, 1)
    path.write_text(json.dumps({"metadata": {"gap_seconds": 600}, "data": [1, 3]}))
    with pytest.raises(CapacityTraceError, match=r"data\[1\] is 3: read as 'unavailable'"):
        load_capacity_trace(path, "unavailable")


def test_overlapping_windows_count_once_in_the_interval() -> None:
    rows = [{"capacity_trace": "a.json", "start": start, "seed": seed}
            for start in (0, 5, 10, 40, 45) for seed in (0, 1)]
    groups = batches_of(rows, {"a.json": 20})
    assert [[(r["start"], r["seed"]) for r in g] for g in groups] == [
        [(0, 0), (0, 1), (5, 0), (5, 1), (10, 0), (10, 1)], [(40, 0), (40, 1), (45, 0), (45, 1)]]
    mean, interval = batch_means_interval([[1.0, 1.0], [3.0, 3.0], [2.0]])
    assert mean == pytest.approx(2.0) and interval is not None
    assert interval[0] < 2.0 < interval[1]
    assert batch_means_interval([[1.0, 2.0, 3.0]]) == (2.0, None)  # one window: no interval
    # a rate near 0 (one miss in 40 runs): its interval stays within [0, 1]
    rate, bounds = batch_means_interval([[1.0]] + [[0.0]] * 39, within=(0.0, 1.0))
    assert rate == pytest.approx(0.025) and bounds is not None
    assert bounds[0] == 0.0 and 0.025 < bounds[1] < 1.0


@pytest.mark.subprocess  # provenance asks git for the commit
def test_a_failing_policy_fails_its_own_rows_and_the_others_go_on(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    for name, counts in (("a.json", [4, 4, 2, 0, 4, 4]), ("b.json", [4, 1, 1, 4, 4, 4])):
        (traces / name).write_text(json.dumps({"metadata": {"gap_seconds": 1},
                                               "data": counts}))
    bad = tmp_path / "bad.py"
    bad.write_text("import time\nclass Raises:\n    def decide(self, state):\n"
                   "        if state.time_s > 1: raise RuntimeError('no plan')\n"
                   "        return [0]\n"
                   "class Slow:\n    def decide(self, state):\n        time.sleep(5)\n")
    options = job(policies=("on-demand", "fallback", f"{bad}:Raises", f"{bad}:Slow"),
                  capacity_trace=(traces,), starts=3, seeds=(0, 1), policy_time_s=0.2)
    folder = simulate(options, tmp_path / "out", say=lambda line: None)
    rows = [json.loads(line) for line in (folder / "runs.jsonl").read_text().splitlines()]
    assert len(rows) == 4 * 2 * 3 * 2
    by_policy = {name: [r for r in rows if r["policy"] == name]
                 for name in ("on-demand", "fallback", "Raises", "Slow")}
    assert all(r["failed"] is None and r["cost_ratio"] > 0 for r in by_policy["fallback"])
    assert all(r["cost_ratio"] == 1.0 for r in by_policy["on-demand"])
    assert all("decide raised RuntimeError: no plan" in r["failed"] for r in by_policy["Raises"])
    assert all("--policy-time 0.2 s" in r["failed"] for r in by_policy["Slow"])
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["policies"]["Raises"]["failed"] == 12
    fallback = summary["policies"]["fallback"]
    assert set(fallback["by_trace"]) == {"a.json", "b.json"}
    assert fallback["runs"] == 12 and fallback["failed"] == 0
    document = json.loads((folder / "provenance.json").read_text())
    assert set(document["inputs"]) == {"capacity_trace a.json", "capacity_trace b.json",
                                       "policy_file"}
    assert len(document["inputs"]["capacity_trace a.json"]["sha256"]) == 64


def test_a_fixed_spot_price_replaces_the_price_trace_in_the_lab_too() -> None:
    from workloads.common.spot_market.trace import TraceReplay
    from workloads.doll.experiment import check_inputs
    from workloads.doll.options import DollOptions

    prices, _ = check_inputs(DollOptions(spot_price=0.5))
    replay = TraceReplay(prices, 2000.0)
    assert [replay.price_at(t) for t in (0.0, 10.0, 1e6)] == [0.5, 0.5, 0.5]
    assert replay.changes_between(0.0, 1e6) == []
    parameters = DollOptions(spot_price=0.5).parameters()
    assert parameters["spot_price"] == 0.5 and "zone" not in parameters
