"""One policy's run in the simulator: the lab's engine (engine.py: the same policy object,
PolicyState, schedule, notices, stand-ins, billing and deadline) driven from event to event
instead of on a clock, with the data the workers receive computed instead of streamed.

The events are the lab's: chain steps (or the capacity ticks where the count changes, and
the notices ahead of its falls), price changes, stand-ins and launch overheads ending,
--adapt-interval decisions. Between two events every worker that `producing` says receives
data at its rate λᵢ; B points make a batch: with `--arrivals even` every batch takes B/λᵢ,
with `--arrivals exponential` each batch takes the sum of B exponential gaps of mean
1/λᵢ, the very gaps the lab's worker draws from the same seed (stream.py). A worker that
stops loses its partial batch unless its stream keeps a backlog (fallback); the run ends
when K·⌈J/K⌉ batches are done, as the parameter server's K-batch updates end the lab's.

The policy's decide is called directly; its time limit holds for the whole run (a timer
signal, not a thread per call).
"""

from __future__ import annotations

import heapq
import math
import signal
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from workloads.common.spot_market.capacity import CapacityTrace, TraceEnded
from workloads.common.spot_market.trace import PriceTrace, TraceReplay
from workloads.doll.engine import Engine, PolicyFailed
from workloads.doll.estimation import rates_of_all
from workloads.doll.options import DollJob
from workloads.doll.policies import policy_name
from workloads.doll.stream import arrival_generator, batch_arrivals, worker_seed


class Streams:
    """The workers' streams: points of the batch being collected, batches done, and what
    arrived while up (for λ̂).

    As in the lab, a batch counts once its worker holds it, and a worker that stops (its
    stream not kept) loses the batches it holds that are not yet in a K-batch update: the
    parameter server gathers the first K batches announced, so those are the newest
    `done % K` the fleet completed (the lab skips them when it asks for their gradients)."""

    def __init__(self, rates: list[float], batch_size: int, keep_backlog: bool,
                 k: int = 1) -> None:
        self.rates = rates
        self.batch_size = batch_size
        self.keep_backlog = keep_backlog
        self.k = k
        self.clock = 0.0
        self.held: list[deque[float]] = [deque(maxlen=k - 1) for _ in rates] \
            if k > 1 and not keep_backlog else []
        """Per worker, when it completed its newest batches (as many as an update lacks)."""
        self.lost = 0
        self.partial = [0.0] * len(rates)
        self.done = 0
        self.arrived = [0.0] * len(rates)
        self.up_s = [0.0] * len(rates)
        self.producing = [False] * len(rates)
        self.producers: list[int] = []
        self.waiting: list[int] = []
        self.enough_seen = False

    def set_producing(self, producing: list[bool]) -> None:
        """Who receives data from now on; a worker that stops loses its partial batch,
        unless the stream keeps it (with its backlog)."""
        if not self.keep_backlog:
            stopped = [index for index, (was, now)
                       in enumerate(zip(self.producing, producing, strict=True))
                       if was and not now]
            for index in stopped:
                self.partial[index] = 0.0
            if stopped and self.held:
                self._lose_held(stopped)
        self.producing = producing
        self.producers = [index for index, on in enumerate(producing) if on]
        self.waiting = [index for index, on in enumerate(producing) if not on]

    def _lose_held(self, stopped: list[int]) -> None:
        """The stopped workers' batches among the newest `done % K`: lost."""
        waiting = self.done % self.k
        if waiting:
            newest = heapq.nlargest(waiting, ((at, index) for index, times
                                              in enumerate(self.held) for at in times))
            lost = sum(1 for _, index in newest if index in stopped)
            self.done -= lost
            self.lost += lost
        for index in stopped:
            self.held[index].clear()

    def advance(self, span_s: float) -> None:
        size, rates, partial, held = self.batch_size, self.rates, self.partial, self.held
        for index in self.producers:
            points = rates[index] * span_s
            self.arrived[index] += points
            self.up_s[index] += span_s
            total = partial[index] + points
            batches = int(total // size)
            self.done += batches
            if held and batches:
                for batch in range(max(batches - self.k + 1, 0), batches):
                    held[index].append(self.clock
                                       + ((batch + 1) * size - partial[index]) / rates[index])
            partial[index] = total - batches * size
        self.clock += span_s
        if self.keep_backlog:
            for index in self.waiting:
                partial[index] += rates[index] * span_s  # kept for whoever reads it next

    def read_backlog(self) -> None:
        """Producing workers read what their stream kept at once (fallback's stand-ins)."""
        if self.keep_backlog:
            self.advance(0.0)

    def time_to(self, batches: int, within_s: float) -> float:
        """Seconds until `batches` more are done at the current producers; inf when not
        within `within_s`."""
        if batches <= 0:
            return 0.0
        size, rates, partial = self.batch_size, self.rates, self.partial
        producing = self.producers
        if not producing:
            return math.inf
        if len(producing) == 1:
            index = producing[0]
            at = (batches * size - partial[index]) / rates[index]
            return at if at <= within_s else math.inf
        points = sum(partial[i] + rates[i] * within_s for i in producing)
        if points < batches * size:
            return math.inf  # not even the points for them arrive in time
        # each producer's next completion, merged in time order
        heap = [((size - partial[i]) / rates[i], i) for i in producing]
        heapq.heapify(heap)
        for _ in range(batches - 1):
            at, index = heap[0]
            if at > within_s:
                return math.inf
            heapq.heapreplace(heap, (at + size / rates[index], index))
        return heap[0][0] if heap[0][0] <= within_s else math.inf

    def observed(self, homogeneous: bool, prior: float) -> tuple[float, ...] | None:
        """λ̂ as the lab estimates it, once every worker's share of a batch arrived."""
        if not self.enough_seen:
            self.enough_seen = sum(self.arrived) >= len(self.rates) * self.batch_size
            if not self.enough_seen:
                return None
        arrivals = [int(points) for points in self.arrived]
        return tuple(rates_of_all(arrivals, self.up_s, homogeneous, prior))


class ExponentialStreams(Streams):
    """Streams whose points arrive with exponential gaps: the lab's workers' own gaps, drawn
    from the same seeds (stream.py), so that worker i's n-th batch takes as long here as in
    the lab run of the same seed. A batch is kept as its length in points of the mean flow
    (its time times λᵢ). A batch cut by its worker's stop is drawn again, as the lab's
    worker draws new gaps for the batch it collects after an outage."""

    def __init__(self, rates: list[float], batch_size: int, keep_backlog: bool,
                 seed: int, k: int = 1) -> None:
        super().__init__(rates, batch_size, keep_backlog, k)
        self.generators = [arrival_generator(worker_seed(seed, index))
                           for index in range(len(rates))]
        self.lengths: list[deque[float]] = [deque((self._draw(index),))
                                            for index in range(len(rates))]

    def _draw(self, index: int) -> float:
        rate = self.rates[index]
        return float(batch_arrivals(self.generators[index], rate, self.batch_size)[-1]) * rate

    def set_producing(self, producing: list[bool]) -> None:
        for index, (was, now) in enumerate(zip(self.producing, producing, strict=True)):
            if was and not now:
                self.lengths[index][0] = self._draw(index)
        super().set_producing(producing)

    def _length(self, index: int, ahead: int) -> float:
        """The length of worker `index`'s batch `ahead` batches after the current one."""
        lengths = self.lengths[index]
        while len(lengths) <= ahead:
            lengths.append(self._draw(index))
        return lengths[ahead]

    def advance(self, span_s: float) -> None:
        rates, partial, held = self.rates, self.partial, self.held
        for index in self.producers:
            points = rates[index] * span_s
            self.arrived[index] += points
            self.up_s[index] += span_s
            total = partial[index] + points
            lengths = self.lengths[index]
            reached = -partial[index]  # points into the span where the batch completes
            while total >= lengths[0]:
                length = lengths.popleft()
                total -= length
                self.done += 1
                if held:
                    reached += length
                    held[index].append(self.clock + reached / rates[index])
                if not lengths:
                    lengths.append(self._draw(index))
            partial[index] = total
        self.clock += span_s
        if self.keep_backlog:
            for index in self.waiting:
                partial[index] += rates[index] * span_s

    def time_to(self, batches: int, within_s: float) -> float:
        if batches <= 0:
            return 0.0
        rates, partial, producing = self.rates, self.partial, self.producers
        if not producing:
            return math.inf
        heap = [((self._length(i, 0) - partial[i]) / rates[i], i, 0) for i in producing]
        heapq.heapify(heap)
        for _ in range(batches - 1):
            at, index, ahead = heap[0]
            if at > within_s:
                return math.inf
            heapq.heapreplace(
                heap, (at + self._length(index, ahead + 1) / rates[index], index, ahead + 1))
        return heap[0][0] if heap[0][0] <= within_s else math.inf


def streams_for(rates: list[float], batch_size: int, keep_backlog: bool, arrivals: str,
                seed: int, k: int = 1) -> Streams:
    if arrivals == "exponential":
        return ExponentialStreams(rates, batch_size, keep_backlog, seed, k)
    return Streams(rates, batch_size, keep_backlog, k)


class PolicyTimeLimit(BaseException):
    """The run's policy decisions took longer than its time limit (a BaseException, so
    that the engine's catching what a policy raises does not catch it)."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """PolicyTimeLimit in this (the main) thread once `seconds` of wall time passed."""

    def expire(signum: int, frame: Any) -> None:
        raise PolicyTimeLimit

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)


@dataclass(frozen=True)
class Outcome:
    """A finished run: the engine (meter, counts) and when the work was done."""

    engine: Engine
    finish_s: float


def replay(entry: str, config: DollJob, prices: PriceTrace,
           capacity: CapacityTrace | None = None, start: int | None = None,
           arrivals: str = "even") -> Outcome:
    """Run policy `entry` on the engine, from event to event, until the work is done, its
    workers' points arriving `arrivals` (ARRIVALS); PolicyFailed when its policy fails (or
    its capacity trace ends first under Can't Be Late's rules)."""
    engine = Engine(entry, config, capacity, start)
    engine.record_capacity = False
    engine.policy.reporting = False  # a built-in's plan probability: not reported here
    return Simulation(engine, config, TraceReplay(prices, config.compression), arrivals).run()


class Simulation:
    def __init__(self, engine: Engine, config: DollJob, prices: TraceReplay,
                 arrivals: str = "even") -> None:
        self.engine = engine
        self.config = config
        self.prices = prices
        self.prices_change = prices.loop_s > 0
        self.streams = streams_for(engine.rates, config.batch_size, engine.stand_ins_on,
                                   arrivals, config.seed, config.k)
        self.needed = config.k * -(-config.batches // config.k)
        self.observed: tuple[float, ...] | None = None
        self.ticks = 0  # capacity ticks stepped (or chain steps)
        self.capacity_event = -math.inf  # the next capacity tick that matters

    def run(self) -> Outcome:
        engine, config, streams = self.engine, self.config, self.streams
        homogeneous, workers = config.rates == "homogeneous", range(config.workers)
        engine.price = self.prices.price_at(0.0)
        engine.update_capacity(0.0)
        engine.decide_here(0.0, False, 0, None)
        now, next_status, version, change = 0.0, engine.next_status_s(0.0), -1, math.inf
        while True:
            price_changed = self._replay_prices(now) if self.prices_change else False
            engine.bill(now)
            self._step_schedule(now)
            scheduled = now >= next_status
            if engine.decision_due(now, scheduled, price_changed):
                if scheduled or price_changed:
                    self.observed = streams.observed(homogeneous, config.rate)
                    next_status = engine.next_status_s(now)
                engine.decide_here(now, price_changed, min(streams.done, config.batches),
                                   self.observed)
            if engine.version != version or now >= change:
                version = engine.version
                streams.set_producing([engine.producing(i, now) for i in workers])
                streams.read_backlog()
                pending = engine.next_change_s(now)
                change = math.inf if pending is None else pending
            following = self._next_event(now, next_status, change)
            finish = now + streams.time_to(self.needed - streams.done, following - now)
            if finish <= following:
                streams.advance(finish - now)
                engine.bill(finish)
                return Outcome(engine, finish)
            if following == math.inf:
                raise PolicyFailed(engine.failure(now, "no worker receives data and nothing "
                                                       "will change"))
            streams.advance(following - now)
            now = following

    def _replay_prices(self, now: float) -> bool:
        """As the lab: the trace's changes up to now, taken by the engine."""
        engine = self.engine
        window = engine.price_window(now)
        if window is not None:
            engine.price_changes += self.prices.changes_between(*window)
        return engine.take_prices(now)

    def _step_schedule(self, now: float) -> None:
        """The chain steps due by now (as the lab's loop takes them), or one capacity step
        when a tick began (or a notice came due) since the last."""
        engine = self.engine
        if engine.capacity is None:
            due = int(now / self.config.refresh_s + 1e-9)
            while self.ticks < due:
                engine.step(now)
                self.ticks += 1
            return
        tick = engine.tick(now)
        if tick != self.ticks or engine.warning_s > 0 or self.engine.cant_be_late:
            self.ticks = tick
            engine.step(now)

    def _next_event(self, now: float, next_status: float, change: float) -> float:
        engine, config = self.engine, self.config
        following = change if engine.cant_be_late else min(change, next_status)
        if engine.price_changes:
            following = min(following, engine.price_changes[0][0])
        elif self.prices_change:
            following = min(following, engine.prices_known_until)
        if engine.capacity is None:
            following = min(following, (self.ticks + 1) * config.refresh_s)
        else:
            if now >= self.capacity_event:
                self.capacity_event = self._next_capacity_event(now)
            following = min(following, self.capacity_event)
            if engine.warning_s > 0:
                notice_at = self.capacity_event - engine.warning_s
                if notice_at > now:
                    following = min(following, notice_at)
        return following if following > now + 1e-12 else now + 1e-12

    def _next_capacity_event(self, now: float) -> float:
        """The next tick where the count changes (every tick under Can't Be Late's rules,
        which decide at each)."""
        engine = self.engine
        replay = engine.capacity
        assert replay is not None
        tick = engine.tick(now)
        following = tick + 1
        try:
            if not self.engine.cant_be_late:
                current = replay.capacity_of_tick(tick)
                limit = following + len(replay.trace.counts)
                while following < limit and replay.capacity_of_tick(following) == current:
                    following += 1
        except TraceEnded:
            pass  # the step there fails the run
        return replay.tick_start(following)


def timed_replay(entry: str, config: DollJob, prices: PriceTrace,
                 capacity: CapacityTrace | None, start: int | None,
                 limit_s: float, arrivals: str = "even") -> tuple[Outcome, float]:
    """`replay` within `limit_s` of wall time (PolicyFailed past it), and its wall time."""
    began = time.perf_counter()
    try:
        with time_limit(limit_s):
            outcome = replay(entry, config, prices, capacity, start, arrivals)
    except PolicyTimeLimit:
        raise PolicyFailed(f"policy {policy_name(entry)} failed: its run took longer than "
                           f"--policy-time {limit_s:g} s") from None
    return outcome, time.perf_counter() - began
