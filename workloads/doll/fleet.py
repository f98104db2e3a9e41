"""The worker actors of a run: one slot per worker, each slot holding its current actor.

A slot's actor is replaced when the `kill` preemption mode kills it, or when it dies for
real (its node is lost): the fresh actor gets a new key, so the parameter server can never
confuse its batches with the dead one's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import ray

from workloads.doll.worker import StreamWorker


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
        self, rates: list[float], batch_size: int, hidden: int, parameter_server: Any
    ) -> None:
        self.batch_size = batch_size
        self.hidden = hidden
        self.parameter_server = parameter_server
        self.slots = [Slot(index, rate) for index, rate in enumerate(rates)]
        for slot in self.slots:
            self._start_actor(slot)
        ray.get([slot.actor.ready.remote() for slot in self.slots])

    def _start_actor(self, slot: Slot) -> None:
        slot.actor = StreamWorker.options(max_concurrency=64).remote(
            slot.key, slot.rate, self.batch_size, self.hidden, self.parameter_server
        )
        slot.lifeline = slot.actor.lifeline.remote()
        slot.commands = 0
        slot.up = False

    def begin(self, seed: int) -> None:
        """Every worker down with nothing buffered, streams seeded for this run."""
        ray.get([s.actor.begin.remote(seed * 1000 + s.index) for s in self.slots])
        for slot in self.slots:
            slot.up = False

    def set_up(self, slot: Slot, up: bool) -> None:
        """Resume or preempt (the `markov` way: the actor lives on, data is dropped)."""
        if slot.up == up:
            return
        slot.up = up
        slot.commands += 1
        slot.actor.set_up.remote(up, slot.commands)

    def replace(self, slot: Slot, kill: bool) -> None:
        """A fresh actor in the slot, down until told otherwise (the old one killed first
        when `kill`)."""
        if kill:
            ray.kill(slot.actor, no_restart=True)
        slot.generation += 1
        self._start_actor(slot)
        slot.actor.begin.remote(slot.generation * 7919 + slot.index)

    def lost(self) -> list[Slot]:
        """Slots whose actor died without being killed here."""
        lifelines = [slot.lifeline for slot in self.slots]
        dead, _ = ray.wait(lifelines, num_returns=len(lifelines), timeout=0)
        dead_ids = set(dead)
        return [slot for slot in self.slots if slot.lifeline in dead_ids]

    async def stats(self, timeout_s: float = 1.0) -> list[tuple[int, float] | None]:
        """(arrivals, up seconds) per slot; None for an actor that does not answer in time
        (dead, or a replacement still starting)."""
        futures = [asyncio.wrap_future(slot.actor.stats.remote().future()) for slot in self.slots]
        done, pending = await asyncio.wait(futures, timeout=timeout_s)
        for future in pending:
            future.cancel()
        return [
            future.result() if future in done and future.exception() is None else None
            for future in futures
        ]

    def shutdown(self) -> None:
        for slot in self.slots:
            ray.kill(slot.actor, no_restart=True)
