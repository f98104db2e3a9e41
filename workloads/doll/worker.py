"""A stream worker: data arrives at rate λ (exponential inter-arrival times) while the
worker is up and is lost while it is down; every B points make a batch, announced to the
parameter server, whose gradient the server later asks for with its current weights.

With `keep_backlog` (the `fallback` policy, an extension of the paper) the stream keeps
what arrives during an outage, as a stream service would: whoever takes the stream over
next reads the backlog at once, and batches held at the preemption are announced again."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import ray

from workloads.doll.data import load_split, sample_stream
from workloads.doll.model import Mlp
from workloads.doll.stream import arrival_generator, batch_arrivals


def stream_start(clock: float, up_since: float, keep_backlog: bool) -> tuple[float, float]:
    """Where the next batch starts reading the stream, and the stream seconds skipped (lost)
    to get there. `clock` is where the last batch started or ended, 0 before the first:
    with `keep_backlog` the stream is read on from there, outage or not; without, from when
    the worker last came up, and what arrived in between is lost."""
    if clock == 0:
        return up_since, 0.0
    if keep_backlog:
        return clock, 0.0
    started = max(up_since, clock)
    return started, started - clock


@ray.remote
class StreamWorker:
    def __init__(self, batch_size: int, hidden: int, parameter_server: Any) -> None:
        self.key = ""
        self.rate = 1.0
        self.batch_size = batch_size
        self.model = Mlp(hidden)
        self.digits = load_split()
        self.parameter_server = parameter_server
        self.handle = ray.get_runtime_context().current_actor
        self.rng = np.random.default_rng()
        self.arrival_rng = np.random.default_rng()
        self.up = False
        self.command_seq = -1
        self.changed = asyncio.Event()
        self.batches: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.next_batch_id = 0
        self.arrivals = 0
        self.up_s = 0.0
        self.up_since = 0.0
        self.clock = 0.0
        self.lost_s = 0.0
        self.stream: asyncio.Task[None] | None = None
        self.keep_backlog = False
        self.collecting: tuple[float, np.ndarray] | None = None  # (start, arrival times)

    async def ready(self) -> bool:
        return True

    async def lifeline(self) -> None:
        """Never returns: its result turns into an error the moment this actor dies."""
        await asyncio.Event().wait()

    async def begin(self, key: str, rate: float, seed: int, keep_backlog: bool = False) -> None:
        """Start a new run as worker `key` with rate λ: down, nothing buffered, counters at
        zero."""
        self.key, self.rate = key, rate
        self.rng = np.random.default_rng(seed)
        self.arrival_rng = arrival_generator(seed)
        self.keep_backlog = False
        self._go_down()
        self.keep_backlog = keep_backlog
        self.arrivals, self.up_s, self.clock, self.lost_s = 0, 0.0, 0.0, 0.0
        self.collecting = None
        if self.stream is None:
            self.stream = asyncio.get_running_loop().create_task(self._stream())

    async def set_up(self, up: bool, seq: int) -> None:
        """Preempt or resume; `seq` orders commands (a stale one is ignored)."""
        if seq <= self.command_seq:
            return
        self.command_seq = seq
        if up and not self.up:
            self.up, self.up_since = True, time.monotonic()
            self._wake()
            for batch_id in list(self.batches):  # kept through an outage: announce again
                await self.parameter_server.batch_ready.remote(self.key, batch_id, self.handle)
        elif not up and self.up:
            self._go_down()

    def _go_down(self) -> None:
        if self.up:
            self.up_s += time.monotonic() - self.up_since
        self.up = False
        if not self.keep_backlog:
            self.batches.clear()  # a preempted instance loses what it held
        self._wake()

    def _wake(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def stats(self) -> tuple[int, float]:
        """(points arrived while up, seconds up) since `begin`, the batch being collected
        included (counting only finished batches would bias λ̂ low by B/2 per worker)."""
        now = time.monotonic()
        up_s = self.up_s + (now - self.up_since if self.up else 0.0)
        partial = 0
        if self.up and self.collecting is not None:
            started, arrival_s = self.collecting
            partial = int(np.searchsorted(arrival_s, now - started, side="right"))
        return self.arrivals + partial, up_s

    async def stream_lost_s(self) -> float:
        """Stream seconds whose points an outage dropped, counted when the stream resumed
        (0 with `keep_backlog`: the next reader starts where the last batch ended)."""
        return self.lost_s

    async def gradient(self, batch_id: int, weights: np.ndarray) -> tuple[np.ndarray, float] | None:
        """The batch's gradient at `weights` and its compute time; None when the batch is
        gone (preempted since it was announced). A batch gives at most one gradient."""
        if not self.up and self.keep_backlog:
            return None  # kept for whoever takes the stream over; announced again then
        batch = self.batches.pop(batch_id, None)
        if batch is None:
            return None
        started = time.perf_counter()
        grad = self.model.gradient(weights, *batch)
        return grad, time.perf_counter() - started

    async def _stream(self) -> None:
        while True:
            if not self.up:
                await self.changed.wait()
                continue
            await self._collect_batch()

    async def _collect_batch(self) -> None:
        """Wait for B arrivals; a preemption on the way loses the partial batch. The clock
        is virtual (the next batch starts where this one's last point arrived), so event-loop
        delays never slow the stream down."""
        arrival_s = batch_arrivals(self.arrival_rng, self.rate, self.batch_size)
        started, skipped_s = stream_start(self.clock, self.up_since, self.keep_backlog)
        self.lost_s += skipped_s
        self.clock = started  # a batch preempted half-way resumes (or loses) from here
        self.collecting = (started, arrival_s)
        changed = self.changed
        remaining = started + arrival_s[-1] - time.monotonic()
        try:
            await asyncio.wait_for(changed.wait(), timeout=max(remaining, 0.0))
        except TimeoutError:
            self.collecting = None
            if changed.is_set():  # preempted just as the last point arrived
                self.arrivals += self.batch_size
                return
            self.clock = started + arrival_s[-1]
            self.arrivals += self.batch_size
            batch_id = self.next_batch_id
            self.next_batch_id += 1
            self.batches[batch_id] = sample_stream(self.digits, self.rng, self.batch_size)
            await self.parameter_server.batch_ready.remote(self.key, batch_id, self.handle)
            return
        self.collecting = None
        if self.keep_backlog:
            return  # nothing read is lost: the stream is read again from `clock`
        elapsed = time.monotonic() - started
        self.arrivals += int(np.searchsorted(arrival_s, elapsed, side="right"))
