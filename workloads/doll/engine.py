"""The one engine of a DOLL policy's run, shared by the lab and the simulator: the preemption
schedule (the Markov chains, or a capacity trace) with its interruption notices, who holds
a spot instance, the policy object and the `PolicyState` it decides on, fallback's stand-ins,
Can't Be Late's restart overheads, billing and the deadline.

The lab (policy_run.PolicyRun) drives it on the wall clock, with Ray actors receiving the
data; the simulator (replay.py) drives it with time advanced from event to event, the data
the workers receive computed from the same `producing` answer. Both call the same methods
in the same order: step the schedule, bill, decide, grant.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from vocab.errors import RunFailed
from workloads.common.spot_market.billing import Meter
from workloads.common.spot_market.capacity import (
    CapacityReplay,
    CapacityTrace,
    TraceEnded,
    split_capacity,
)
from workloads.common.spot_market.preemption import MarkovAvailability
from workloads.doll.options import DollJob
from workloads.doll.policies import PolicyState, checked_spot_set, make_policy, policy_name

ASKS_PER_MOMENT = 4
"""A policy whose own answer changed who holds a spot instance (it asked for more spot
workers than the capacity has, or a notice came with them) is asked again at once, up to
this many asks in all, in the lab and the simulator alike: without it the lab asked again
at its loop's next step and the simulator at its next event, and at a run's start,
uniform-progress with no spot capacity waited in one and, a few milliseconds behind its
line, took on-demand in the other."""


class PolicyFailed(RunFailed):
    """A policy's own run failed (its decide raised, answered badly or too late, or its
    capacity trace ended first): one line naming the policy and why; the others still run."""


class AlwaysUp:
    """No preemption model: with a capacity trace, the trace alone takes spot away."""

    def __init__(self, workers: int) -> None:
        self.up = [True] * workers

    def step(self) -> list[bool]:
        return self.up  # never changed: the same list


class Lookahead:
    """The chains run `lead` steps ahead of the run, so a loss is known `lead` steps (the
    notice's lead time) before it happens; the run sees the same schedule as without."""

    def __init__(self, chains: Any, lead: int) -> None:
        self.chains = chains
        self.future: deque[list[bool]] = deque(chains.step() for _ in range(lead))

    def step(self) -> list[bool]:
        if not self.future:
            return list(self.chains.step())
        self.future.append(self.chains.step())
        return self.future.popleft()

    def steps_until_down(self, worker: int) -> int | None:
        """In how many steps the worker's chain goes down, within the lead (None: not)."""
        for ahead, states in enumerate(self.future, 1):
            if not states[worker]:
                return ahead
        return None


class Engine:
    """One policy's run on one schedule: call `begin`, then at each step `step(now)` (the
    chains and the capacity), `bill(now)`, and when `decision_due` says so,
    `decide(now, ...)`; `producing(i, now)` says whether worker i receives data."""

    def __init__(self, entry: str, config: DollJob, capacity: CapacityTrace | None = None,
                 start: int | None = None) -> None:
        self.name = policy_name(entry)
        self.policy = make_policy(entry, config)
        self.stand_ins_on = bool(getattr(self.policy, "stand_ins", False))
        self.config = config
        self.cant_be_late = config.cant_be_late
        self.rates = config.worker_rates()
        self.rate_tuple = tuple(self.rates)
        self.total_rate = sum(self.rates)
        self.theta0_s = config.work_points / self.total_rate
        self.deadline_s = config.deadline_factor * self.theta0_s
        self.capacity = (
            None if capacity is None
            else CapacityReplay.seeded(capacity, config.compression, config.seed, start,
                                       loop=not config.cant_be_late)
        )
        self.warning_s = config.warning_compressed_s
        lead = 0 if self.warning_s <= 0 else -int(-self.warning_s // config.refresh_s)
        self.chains: Any = (
            Lookahead(MarkovAvailability(config.workers, config.alpha, config.seed), lead)
            if self.capacity is None else AlwaysUp(config.workers)
        )
        workers = config.workers
        self.chain_up = [True] * workers
        self.spot_up = [True] * workers
        self.capacity_now: int | None = None
        self.granted: list[int] = []  # spot workers holding one of the capacity's instances
        self.held: set[int] = set()  # spot workers whose spot instance was up at the last grant
        self.held_spot: set[int] = set()  # the spot workers then
        self.reclaim_at: dict[int, float] = {}  # noticed spot worker -> when it is lost
        self.availability_changed = False
        self.stand_ins: dict[int, float] = {}  # fallback: preempted slot -> stand-in asked at
        self.lost: set[int] = set()  # lab: slots lost for real, their fresh actor starting
        self.kind: list[str | None] = [None] * workers  # "spot", "on-demand" or None (idle)
        self.ready_at = [0.0] * workers  # Can't Be Late: the launch overhead ends then
        self.spot: set[int] = set()
        self.meter = Meter(config.on_demand_price)
        self.price = 0.0
        self.price_changes: list[tuple[float, float]] = []  # (time, price) fetched, to come
        self.prices_known_until = 0.0
        self.preemptions = 0
        self.switches = 0
        self.decisions = 0
        self.steps = 0
        self.decided_tick = -1
        self.events: list[dict[str, Any]] = []
        self.capacity_rows: list[dict[str, Any]] = []
        self.record_capacity = True
        self.no_notices: tuple[float | None, ...] = (None,) * workers
        self._constant_state = {  # the PolicyState fields that hold for the whole run
            "workers": workers, "rates": self.rate_tuple, "deadline_s": self.deadline_s,
            "batches_total": config.batches, "batch_size": config.batch_size,
            "on_demand_price": config.on_demand_price,
        }
        self.version = 0  # counts the grants: who may produce changed
        self._seen_version = -1
        self._billed_key: tuple[int, frozenset[int] | None] = (-1, None)
        self._counts = (0, 0, 0, 0.0)
        self._seen_values: tuple[tuple[bool, ...], frozenset[int]] = ((), frozenset())
        self._checked_answer: frozenset[int] | range | None = None
        self.next_ready = math.inf  # the earliest launch overhead still running ends then
        self._tick_now, self._tick = -math.inf, 0

    # --- the schedule -----------------------------------------------------------------------

    def step(self, now: float) -> None:
        """One preemption-chain step (or capacity tick), then who holds a spot instance."""
        chain_up, capacity = self.chains.step(), self.capacity_now
        self.steps += 1
        self.update_capacity(now)
        if chain_up != self.chain_up or capacity != self.capacity_now or self.warning_s > 0 \
                or self.spot != self.held_spot:
            self.chain_up = chain_up
            self.grant(now)
        if self.capacity_now is not None and self.record_capacity:
            self.capacity_rows.append({
                "policy": self.name, "time_s": round(now, 4),
                "spot_capacity": self.capacity_now,
                "spot_running": sum(1 for i in self.granted if i not in self.lost),
            })

    def tick(self, now: float) -> int:
        """The capacity trace's tick at `now` (the last one asked for is kept)."""
        if now != self._tick_now:
            assert self.capacity is not None
            self._tick_now, self._tick = now, self.capacity.tick_at(now)
        return self._tick

    def next_capacity_moment_s(self, now: float) -> float:
        """Under a capacity trace, the next time after `now` a tick begins or a notice of
        one comes due (its start less the lead time); math.inf without a trace. The lab's
        loop wakes then, as the simulator does, rather than at its next step."""
        replay = self.capacity
        if replay is None:
            return math.inf
        following = replay.tick_start(replay.tick_at(now) + 1)
        if self.warning_s > 0:
            following = min(following, replay.tick_start(replay.tick_at(now + self.warning_s)
                                                         + 1) - self.warning_s)
        return following

    def update_capacity(self, now: float) -> None:
        if self.capacity is not None:
            try:
                self.capacity_now = self.capacity.capacity_of_tick(self.tick(now))
            except TraceEnded as error:
                raise PolicyFailed(self.failure(now, str(error))) from None

    def grant(self, now: float) -> None:
        """Spot up: the chain is up and, under a capacity trace, the worker holds one of the
        instances that exist (over capacity, the newest are preempted); then the notices of
        the losses the lead time can see coming."""
        self.version += 1
        if self.capacity_now is not None:
            self.granted, preempted = split_capacity(
                self.capacity_now, sorted(self.spot), self.granted
            )
            for index in preempted:
                if index not in self.reclaim_at:  # no notice came before (no lead time)
                    self.events.append({"t": now, "worker": index, "event": "notice"})
        granted = set(self.granted)
        before = self.spot_up
        capacity = self.capacity_now is not None
        self.spot_up = [
            self.chain_up[i] and (not capacity or i not in self.spot or i in granted)
            for i in range(self.config.workers)
        ]
        self.availability_changed |= before != self.spot_up
        # a preemption: a worker still on spot lost the spot instance it held (whatever the
        # policy does next); a worker newly on spot without an instance was never preempted
        held = {i for i in self.spot if self.spot_up[i]}
        for index in sorted(self.held - held):
            if index in self.spot and index not in self.lost:
                self.preemptions += 1
                self.events.append({"t": now, "worker": index, "event": "preempted"})
        for index in sorted(held - self.held):
            if index in self.held_spot:
                self.events.append({"t": now, "worker": index, "event": "recovered"})
        self.held, self.held_spot = held, set(self.spot)
        self._notice(now)
        if self.stand_ins_on:
            self._track_stand_ins(now)
        self._launch(now)

    def _notice(self, now: float) -> None:
        """Interruption notices: a spot worker whose instance the schedule takes within the
        lead time learns when (`reclaim_at`); the notice is forgotten once it is not held."""
        for index in [i for i, at in self.reclaim_at.items() if i not in self.held or at < now]:
            del self.reclaim_at[index]
        if self.warning_s <= 0 or not self.held:
            return
        noticed: list[tuple[int, float]] = []
        if self.capacity is None:
            refresh = self.config.refresh_s
            for index in self.held:
                ahead = self.chains.steps_until_down(index)
                if ahead is not None:
                    noticed.append((index, (self.steps + ahead) * refresh))
        else:
            noticed = self._capacity_losses(now)
        for index, at in noticed:
            if index not in self.reclaim_at:
                self.reclaim_at[index] = at
                self.availability_changed = True
                self.events.append({"t": now, "worker": index, "event": "notice",
                                    "reclaim_s": round(at - now, 6)})

    def _capacity_losses(self, now: float) -> list[tuple[int, float]]:
        """The held instances a capacity tick within the lead time puts over capacity (the
        newest first, as `split_capacity` will), with that tick's start."""
        assert self.capacity is not None
        replay, found = self.capacity, []
        held_order = [i for i in self.granted if i in self.held]
        tick = self.tick(now) + 1
        while (boundary := replay.tick_start(tick)) <= now + self.warning_s:
            try:
                count = replay.capacity_of_tick(tick)
            except TraceEnded:
                break
            found += [(index, boundary) for index in held_order[count:]]
            held_order = held_order[:count]
            tick += 1
        return found

    def _track_stand_ins(self, now: float) -> None:
        """fallback: a spot worker preempted (or noticed) gets an on-demand stand-in, asked
        for at once and taking its stream over a launch delay later; released when its spot
        instance is up and not about to go."""
        for index in range(self.config.workers):
            on_spot = index in self.spot
            needs = on_spot and (not self.spot_up[index] or index in self.reclaim_at)
            if needs and index not in self.stand_ins:
                self.stand_ins[index] = now
            elif not needs and index in self.stand_ins:
                del self.stand_ins[index]
                self.events.append({"t": now, "worker": index, "event": "stand-in released"})

    def stand_in_running(self, index: int, now: float) -> bool:
        asked = self.stand_ins.get(index)
        return asked is not None and now - asked >= self.config.launch_delay_compressed_s

    def _launch(self, now: float) -> None:
        """Can't Be Late's rule: every launch of an instance (the first, after a preemption,
        or a move between spot and on demand) costs the restart overhead, billed, without
        progress."""
        if not self.cant_be_late:
            return
        overhead = self.config.launch_delay_compressed_s
        for index in range(self.config.workers):
            kind = None if index in self.spot and not self.spot_up[index] \
                else "spot" if index in self.spot else "on-demand"
            if kind != self.kind[index]:
                if kind is not None:
                    self.ready_at[index] = now + overhead
                    self.next_ready = min(self.next_ready, now + overhead)
                self.kind[index] = kind

    def producing(self, index: int, now: float) -> bool:
        """Worker `index` receives data now: on demand, or on a spot instance that is up (or
        a stand-in that took over), past any launch overhead, and not lost for real."""
        if index in self.lost:
            return False
        if index not in self.spot or self.spot_up[index]:
            return now >= self.ready_at[index]
        return self.stand_in_running(index, now)

    def next_change_s(self, now: float) -> float | None:
        """The next time after `now` a stand-in starts or a launch overhead ends (when
        `producing` changes without a step); None when none is pending."""
        if self.next_ready <= now:
            self.next_ready = min((at for at in self.ready_at if at > now), default=math.inf)
        following = self.next_ready
        if self.stand_ins:
            delay = self.config.launch_delay_compressed_s
            following = min([following, *(asked + delay for asked in self.stand_ins.values()
                                          if asked + delay > now)])
        return None if following == math.inf else following

    # --- prices and billing -----------------------------------------------------------------

    def price_window(self, now: float) -> tuple[float, float] | None:
        """The next span of the price trace to fetch changes in, once `now` reached the end
        of what is known (a deadline's worth at a time); None while it has not."""
        if now < self.prices_known_until:
            return None
        start, self.prices_known_until = \
            self.prices_known_until, self.prices_known_until + self.deadline_s
        return start, self.prices_known_until

    def take_prices(self, now: float) -> bool:
        """Bill up to each price change fetched for by now and take the new price; True
        when the price differs from before."""
        changed = False
        while self.price_changes and self.price_changes[0][0] <= now:
            at, price = self.price_changes.pop(0)
            self.bill(at)
            changed = changed or price != self.price
            self.price = price
        return changed

    def bill(self, until: float) -> None:
        """Charge the time since the last bill at the current states and spot price. A
        fallback stand-in is billed from the moment it is asked for (its launch included),
        a launch under Can't Be Late's rules from its start (its overhead included)."""
        key = (self.version, frozenset(self.lost) if self.lost else None)
        if key != self._billed_key:
            self._billed_key = key
            workers, spot, lost, up = self.config.workers, self.spot, self.lost, self.spot_up
            self._counts = (
                len(self.stand_ins) + workers - len(spot) - len(lost - spot),
                len(spot),
                sum(1 for i in spot if up[i] and i not in lost),
                sum(self.rates[i] for i in spot),
            )
        on_demand, spot_count, spot_up, spot_rate = self._counts
        self.meter.charge_until(until, on_demand=on_demand, spot=spot_count, spot_up=spot_up,
                                spot_rate=spot_rate, spot_price=self.price)

    # --- decisions --------------------------------------------------------------------------

    def next_status_s(self, now: float) -> float:
        """When the next scheduled decision is due after `now`: the next point of the
        --adapt-interval grid from the run's start, so that a loop that comes late to one
        (the lab's, on a busy machine) does not push every later one back."""
        interval = self.config.adapt_interval_s
        return (math.floor(now / interval + 1e-9) + 1) * interval

    def decision_due(self, now: float, scheduled: bool, price_changed: bool) -> bool:
        """Under DOLL's rules: every --adapt-interval (`scheduled`), at a price change and
        when a spot instance, the capacity or a notice changed; under Can't Be Late's: once
        per tick of the capacity trace."""
        if self.cant_be_late:
            assert self.capacity is not None
            return self.tick(now) > self.decided_tick
        return scheduled or price_changed or self.availability_changed

    def state(self, now: float, price_changed: bool, processed: int,
              observed: tuple[float, ...] | None) -> PolicyState:
        reclaim = self.reclaim_at
        spot_up, spot = self._seen()
        # A frozen dataclass's __init__ sets each field through object.__setattr__, the
        # largest part of a decision's cost: the instance's dict is filled directly instead,
        # from the fields that hold for the whole run and then those that change (the same
        # fields and values; still frozen for the policy).
        state = object.__new__(PolicyState)
        values = vars(state)
        values.update(self._constant_state)
        values["time_s"] = now
        values["batches_done"] = processed
        values["spot_price"] = self.price
        values["spot_capacity"] = self.capacity_now
        values["spot_up"] = spot_up
        values["spot"] = spot
        values["price_changed"] = price_changed
        values["observed_rates"] = observed
        values["spot_s"] = self.meter.spot_s
        values["spot_up_s"] = self.meter.spot_up_s
        values["notice_s"] = tuple(reclaim[i] - now if i in reclaim else None
                                   for i in range(self.config.workers)) \
            if reclaim else self.no_notices
        return state

    def _seen(self) -> tuple[tuple[bool, ...], frozenset[int]]:
        """spot_up and spot as a policy sees them (made again only after a grant)."""
        if self._seen_version != self.version:
            self._seen_version = self.version
            self._seen_values = (tuple(self.spot_up), frozenset(self.spot))
        return self._seen_values

    def decided(self, now: float, answer: Any) -> None:
        """Take the policy's answer (checked: PolicyFailed otherwise) as the spot workers,
        then who holds a spot instance under it."""
        self.decisions += 1
        # an immutable answer checked last time (the same frozenset, or a range equal to it:
        # a range holds ints only) is not checked again
        checked = self._checked_answer
        if checked is not None and (answer is checked
                                    or type(answer) is range and answer == checked):
            spot = set(checked)
        else:
            try:
                spot = checked_spot_set(answer, self.config.workers)
            except ValueError as error:
                raise PolicyFailed(self.failure(now, str(error))) from None
            if type(answer) in (frozenset, range):
                self._checked_answer = answer
        if self.capacity is not None:
            self.decided_tick = self.tick(now)
        self.availability_changed = False
        if spot == self.spot and self.warning_s <= 0 and (self.steps or self.spot):
            return  # nothing changes
        if self.steps or self.spot:
            self.switches += len(spot ^ self.spot)
        self.spot = spot
        self.grant(now)

    def decide_here(self, now: float, price_changed: bool, processed: int,
                    observed: tuple[float, ...] | None) -> None:
        """The policy's decide(state), called directly (the simulator: the run's time limit
        is checked around the whole run), asked again while `asks_again`; what it raises
        fails its own run."""
        for _ in range(ASKS_PER_MOMENT):
            state = self.state(now, price_changed, processed, observed)
            try:
                answer = self.policy.decide(state)
            except Exception as error:  # noqa: BLE001 - the policy's: reported as its failure
                raise PolicyFailed(self.failure(now, raised(error))) from None
            self.decided(now, answer)
            if not self.asks_again():
                return
            price_changed = False

    def asks_again(self) -> bool:
        """The policy's last answer changed who holds a spot instance: ask it again at the
        same moment (up to ASKS_PER_MOMENT asks; never under Can't Be Late's rules, which
        decide once per tick)."""
        return self.availability_changed and not self.cant_be_late

    def failure(self, now: float, reason: str) -> str:
        return f"policy {self.name} failed at t={now:.1f}s: {reason}"


def cost_reference(config: DollJob, on_demand_cost: float | None) -> float:
    """What cost ratios are to: the on-demand policy's cost in the same run (same seed,
    trace and start), or without one the all-on-demand cost of finishing in θ₀."""
    if on_demand_cost is not None:
        return on_demand_cost
    theta0_s = config.work_points / sum(config.worker_rates())
    return config.workers * config.on_demand_price * theta0_s / 3600.0


def raised(error: BaseException) -> str:
    return f"decide raised {type(error).__name__}: {' '.join(str(error).split())}"
