"""The worker actors of a run: one slot per worker, each slot holding its current actor.

A slot's actor is replaced when the `kill` preemption mode kills it, or when it dies for
real (its node is lost): a fresh actor, never used before, takes the slot under a new key,
so the parameter server can never confuse its batches with the dead one's. Fresh actors
come from a small pool started in advance: Ray needs about a second to start a process,
and that time is not compressed like the rest of the experiment.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ray

from workloads.common.actors import start_actor
from workloads.doll.stream import worker_seed
from workloads.doll.worker import StreamWorker

SPARES = 4
READY_REPORT_S = 2.0
"""While the fleet starts, how often it says how many of its actors are up."""
START_DEATHS_ALLOWED = 3
"""Worker processes that may die before their actor ever ran (lost while a loaded machine
starts dozens of them) while the fleet starts; each is replaced by a fresh actor."""


@dataclass
class Slot:
    index: int
    rate: float
    generation: int = 0
    actor: Any = None
    lifeline: Any = None
    commands: int = 0
    up: bool = False

    @property
    def key(self) -> str:
        return f"w{self.index}.{self.generation}"


class Fleet:
    def __init__(
        self, rates: list[float], batch_size: int, hidden: int, parameter_server: Any,
        say: Callable[[str], None] | None = None, worker_class: Any = StreamWorker,
    ) -> None:
        self.batch_size = batch_size
        self.hidden = hidden
        self.parameter_server = parameter_server
        self.worker_class = worker_class
        self.slots = [Slot(index, rate) for index, rate in enumerate(rates)]
        self.keep_backlog = False
        self.starting: dict[int, Any] = {}  # slot -> ready() of a fresh actor not yet seen up
        self.spares = [self._new_actor() for _ in range(SPARES)]
        for slot in self.slots:
            self._install(slot, self._new_actor())
        try:
            self._wait_until_up(say or (lambda line: None))
        except BaseException:
            self.shutdown()
            raise

    def _wait_until_up(self, say: Callable[[str], None]) -> None:
        """Every actor answering, each whose process died before it ever ran started again
        (at most START_DEATHS_ALLOWED); an actor whose own start raised fails the fleet."""
        waiting: dict[Any, tuple[str, int]] = {}  # ready() -> ("spare" | "slot", index)

        def watch(place: tuple[str, int]) -> None:
            kind, index = place
            actor = self.spares[index] if kind == "spare" else self.slots[index].actor
            waiting[actor.ready.remote()] = place

        for index in range(len(self.spares)):
            watch(("spare", index))
        for slot in self.slots:
            watch(("slot", slot.index))
        total, up, deaths = len(waiting), 0, 0
        while waiting:
            answered, _ = ray.wait(list(waiting), num_returns=len(waiting),
                                   timeout=READY_REPORT_S)
            for ref in answered:
                kind, index = waiting.pop(ref)
                try:
                    ray.get(ref)
                except ray.exceptions.ActorDiedError as error:
                    if error.actor_init_failed or deaths == START_DEATHS_ALLOWED:
                        raise
                    deaths += 1
                    say(f"stream workers: a {kind} worker's process died before it ran; "
                        f"starting another ({deaths} of at most {START_DEATHS_ALLOWED})")
                    fresh = self._new_actor()
                    if kind == "spare":
                        self.spares[index] = fresh
                    else:
                        self._install(self.slots[index], fresh)
                    watch((kind, index))
                    continue
                up += 1
            say(f"stream workers: {up}/{total} up ({SPARES} spares)")

    def actors(self) -> list[Any]:
        return [slot.actor for slot in self.slots]

    def _new_actor(self) -> Any:
        return start_actor(
            self.worker_class,
            self.batch_size,
            self.hidden,
            self.parameter_server,
            options={"max_concurrency": 64},
        )

    def _install(self, slot: Slot, actor: Any) -> None:
        slot.actor = actor
        slot.lifeline = actor.lifeline.remote()
        slot.commands = 0
        slot.up = False

    def begin(self, seed: int, keep_backlog: bool = False) -> None:
        """Every worker down with nothing buffered, streams seeded for this run (kept through
        outages with `keep_backlog`, see worker.py)."""
        self.keep_backlog = keep_backlog
        ray.get(
            [
                s.actor.begin.remote(s.key, s.rate, worker_seed(seed, s.index), keep_backlog)
                for s in self.slots
            ]
        )
        for slot in self.slots:
            slot.up = False

    def set_up(self, slot: Slot, up: bool) -> None:
        """Resume or preempt (the `markov` way: the actor lives on, data is dropped)."""
        if slot.up == up:
            return
        slot.up = up
        slot.commands += 1
        slot.actor.set_up.remote(up, slot.commands)

    def replace(self, slot: Slot, kill: bool) -> Any:
        """A fresh actor in the slot, down until told otherwise (the old one killed first
        when `kill`); the slot counts as starting until `started()` has seen it ready."""
        if kill:
            ray.kill(slot.actor, no_restart=True)
        slot.generation += 1
        fresh = self.spares.pop(0) if self.spares else self._new_actor()
        self.spares.append(self._new_actor())
        self._install(slot, fresh)
        fresh.begin.remote(
            slot.key, slot.rate, slot.generation * 7919 + slot.index, self.keep_backlog
        )
        self.starting[slot.index] = fresh.ready.remote()

    def started(self) -> list[int]:
        """Slots whose fresh actor has answered since the last call."""
        if not self.starting:
            return []
        refs = list(self.starting.values())
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        answered = [index for index, ref in self.starting.items() if ref in ready]
        for index in answered:
            del self.starting[index]
        return answered

    def lost(self) -> list[Slot]:
        """Slots whose actor died without being killed here."""
        lifelines = [slot.lifeline for slot in self.slots]
        dead, _ = ray.wait(lifelines, num_returns=len(lifelines), timeout=0)
        dead_ids = set(dead)
        return [slot for slot in self.slots if slot.lifeline in dead_ids]

    async def stats(self, timeout_s: float = 1.0) -> list[tuple[int, float] | None]:
        """(arrivals, up seconds) per slot; None for a slot whose actor is still starting
        (never waited for) or does not answer in time (dead)."""
        asked = {
            slot.index: asyncio.wrap_future(slot.actor.stats.remote().future())
            for slot in self.slots
            if slot.index not in self.starting
        }
        done: set[asyncio.Future[Any]] = set()
        if asked:
            done, pending = await asyncio.wait(asked.values(), timeout=timeout_s)
            for future in pending:
                future.cancel()
        answers: list[tuple[int, float] | None] = []
        for slot in self.slots:
            answer = asked.get(slot.index)
            ok = answer is not None and answer in done and answer.exception() is None
            answers.append(answer.result() if ok and answer is not None else None)
        return answers

    async def stream_lost(self, timeout_s: float = 5.0) -> tuple[float, float] | None:
        """Stream seconds dropped by outages, summed over the slots' current actors, and the
        points they held (each slot's seconds at its rate); None when one does not answer in
        time (dead)."""
        asked = asyncio.gather(*(slot.actor.stream_lost_s.remote() for slot in self.slots))
        try:
            counts = await asyncio.wait_for(asked, timeout_s)
        except (TimeoutError, ray.exceptions.RayActorError):
            return None
        return (float(sum(counts)),
                float(sum(slot.rate * lost for slot, lost in zip(self.slots, counts,
                                                                  strict=True))))

    def shutdown(self) -> None:
        for actor in [*self.actors(), *self.spares]:
            ray.kill(actor, no_restart=True)
