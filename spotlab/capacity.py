"""When spot capacity is there, per spot slot, and when the schedule interrupts a node:
time-compressed and seeded.

The schedule (`--preemptions`, vocab/preemptions.py):
- `model` with `markov`: the DOLL paper's two-state chain per slot
  (spot_market.preemption), one step every refresh; a slot is preempted when its chain
  goes down and may be refilled once it is up again; α = 1 means never preempted.
- `model` with a trace: a spot price trace replayed with a bid; every slot is preempted while
  the price is above the bid (one zone, one price) and refilled once it is not.
- `model` with a capacity trace: slot i has capacity while the trace's count is above i;
  when the count falls, the slots above it are preempted, and refilled when it rises.
- `at:T,...`: one running spot node is interrupted at each time; capacity is always there.
- `none`: nothing is interrupted (only `spotlab.lab.interrupt` preempts).

The schedule is the seed's and the trace's alone, so it is known ahead:
`interruptions_between` lists the interruptions to come (the lab sends rebalance
recommendations ahead of some).
"""

from __future__ import annotations

from dataclasses import dataclass

from spotlab.config import SpotLabConfig
from vocab.preemptions import MODEL
from workloads.common.spot_market.capacity import CapacityReplay
from workloads.common.spot_market.preemption import MarkovAvailability
from workloads.common.spot_market.trace import TraceReplay


@dataclass(frozen=True)
class Interruption:
    """One interruption the schedule asks for: at lab time `t` (seconds since the lab came
    up), of the node in `slot` (None: any running spot node)."""

    t: float
    slot: int | None
    index: int
    """Its place among the schedule's interruptions at `t` (several slots may go down at one
    step; a time may be given twice)."""

    @property
    def key(self) -> tuple[float, int]:
        return (self.t, self.index)


class SpotCapacity:
    """`available(t)`: per slot, whether spot capacity is there at lab time t; `price(t)`: the
    spot price then ($/h); `interruptions_between(a, b)`: what the schedule interrupts in
    (a, b]."""

    def __init__(self, config: SpotLabConfig) -> None:
        self.config = config
        self.replay = TraceReplay(config.price_trace(), config.trace_compression)
        self.schedule = config.schedule()
        self._chains = MarkovAvailability(config.spot, config.alpha, config.seed)
        self._states: list[list[bool]] = [[True] * config.spot]
        """The chains' states after steps `_first_step`, `_first_step + 1`, ...: computed as
        far ahead as anyone asked, forgotten once the clock has passed them."""
        self._first_step = 0
        self.capacity = None if config.capacity_trace is None else CapacityReplay.seeded(
            config.capacity(), config.trace_compression, config.seed)

    @property
    def model(self) -> str | None:
        """"markov" or "trace" when the lab's model decides, None for explicit schedules."""
        return self.config.preemption_model if self.schedule.kind == MODEL else None

    def available(self, lab_s: float) -> list[bool]:
        if self.model == "capacity":
            assert self.capacity is not None
            count = self.capacity.capacity_at(lab_s)
            return [slot < count for slot in range(self.config.spot)]
        if self.model == "trace":
            assert self.config.bid is not None
            return [self.price(lab_s) <= self.config.bid] * self.config.spot
        if self.model is None or self.config.alpha >= 1.0:  # capacity is always there
            return [True] * self.config.spot
        due = self._due(lab_s)
        states = self._chain_states(due)
        # every refresh is stepped, missed ones too: the schedule is the seed's
        self._forget_before(due)
        return list(states)

    def interruptions_between(self, start_s: float, end_s: float) -> list[Interruption]:
        """The interruptions in (start_s, end_s], in time order (lab seconds)."""
        found: list[Interruption] = []
        if self.model == "markov" and self.config.alpha < 1.0:
            first, last = self._due(start_s) + 1, self._due(end_s)
            for step in range(max(first, 1), last + 1):
                before, after = self._chain_states(step - 1), self._chain_states(step)
                down = [slot for slot in range(self.config.spot) if before[slot]
                        and not after[slot]]
                found += [Interruption(step * self.config.refresh_s, slot, index)
                          for index, slot in enumerate(down)]
        elif self.model == "trace":
            assert self.config.bid is not None
            price = self.price(start_s)
            for wall, new_price in self.replay.changes_between(start_s, end_s):
                if price <= self.config.bid < new_price:
                    found += [Interruption(wall, slot, slot) for slot in range(self.config.spot)]
                price = new_price
        elif self.model == "capacity":
            found += self._capacity_falls(start_s, end_s)
        elif self.schedule.kind == "at":
            times = self.schedule.times_s
            found += [Interruption(t, None, times[:position].count(t))
                      for position, t in enumerate(times) if start_s < t <= end_s]
        return found

    def _capacity_falls(self, start_s: float, end_s: float) -> list[Interruption]:
        """At each tick boundary in (start_s, end_s] where the count falls, the slots from the
        new count up to the old one (those the lab has)."""
        assert self.capacity is not None
        replay, gap = self.capacity, self.capacity.trace.gap_s
        found: list[Interruption] = []
        count = replay.capacity_at(start_s)
        tick = int((replay.offset_s + max(start_s, 0.0) * replay.compression) // gap) + 1
        while (wall := (tick * gap - replay.offset_s) / replay.compression) <= end_s:
            new = replay.capacity_at(wall)
            found += [Interruption(wall, slot, slot)
                      for slot in range(new, min(count, self.config.spot))]
            count, tick = new, tick + 1
        return found

    def price(self, lab_s: float) -> float:
        return self.replay.price_at(lab_s)

    def _due(self, lab_s: float) -> int:
        return int(lab_s // self.config.refresh_s)

    def _chain_states(self, step: int) -> list[bool]:
        """The chains after `step` steps (computed on demand, in order)."""
        if step < self._first_step:
            raise ValueError(f"step {step} is forgotten (the clock is at {self._first_step})")
        while self._first_step + len(self._states) <= step:
            self._states.append(self._chains.step())
        return self._states[step - self._first_step]

    def _forget_before(self, step: int) -> None:
        drop = min(step - self._first_step, len(self._states) - 1)
        if drop > 0:
            del self._states[:drop]
            self._first_step += drop
