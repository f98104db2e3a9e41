"""The parameter server: K-batch synchronous SGD. It takes the first K batch-ready signals
from any workers, asks those workers for their gradients at the current weights, averages
K gradients and applies them. A batch whose worker was preempted or died is skipped and
the next ready batch takes its place; a batch key is applied at most once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import ray

from workloads.doll.model import Mlp


@ray.remote
class SyncParameterServer:
    def __init__(self, hidden: int, learning_rate: float, k: int) -> None:
        self.model = Mlp(hidden)
        self.learning_rate = learning_rate
        self.k = k
        self.ready: asyncio.Queue[tuple[str, int, Any]] = asyncio.Queue()
        self.updater: asyncio.Task[None] | None = None

    async def begin(
        self, run: str, total_batches: int, eval_every: int, evaluator: Any, seed: int
    ) -> None:
        if self.updater is not None:
            self.updater.cancel()
        self.ready = asyncio.Queue()
        self.run = run
        self.weights = self.model.initial_weights(np.random.default_rng(seed))
        self.total_batches = total_batches
        self.eval_every = eval_every
        self.evaluator = evaluator
        self.processed = 0
        self.applied: set[tuple[str, int]] = set()
        self.announced = 0
        self.skipped = 0
        self.duplicates = 0
        self.updates: list[dict[str, float]] = []
        self.started = time.monotonic()
        self.done = asyncio.Event()
        self.updater = asyncio.get_running_loop().create_task(self._run())

    async def batch_ready(self, worker_key: str, batch_id: int, worker: Any) -> None:
        self.announced += 1
        self.ready.put_nowait((worker_key, batch_id, worker))

    async def received(self) -> int:
        """Batches whose data the workers received: every one announced, but those whose
        worker lost it before its gradient was asked (skipped) or that came twice. The
        simulator counts the same (it models the data, not the learning); processed lags
        it by the updates not yet gathered or applied."""
        return self.announced - self.skipped - self.duplicates

    async def wait_done(self) -> None:
        await self.done.wait()

    async def report(self) -> dict[str, Any]:
        return {
            "processed": self.processed,
            "skipped": self.skipped,
            "duplicates": self.duplicates,
            "updates": self.updates,
            "weights": self.weights,
        }

    async def _gather_gradients(self) -> tuple[list[np.ndarray], float, float]:
        """K gradients at the current weights, the time spent asking for them (waiting for
        ready signals excluded) and the longest single gradient compute among them."""
        gradients: list[np.ndarray] = []
        keys: set[tuple[str, int]] = set()
        asking_s = compute_s = 0.0
        while len(gradients) < self.k:
            signals = [await self.ready.get() for _ in range(self.k - len(gradients))]
            asked = time.perf_counter()
            requests = [
                worker.gradient.remote(batch_id, self.weights) for _, batch_id, worker in signals
            ]
            replies = await asyncio.gather(*requests, return_exceptions=True)
            asking_s += time.perf_counter() - asked
            for (worker_key, batch_id, _), reply in zip(signals, replies, strict=True):
                key = (worker_key, batch_id)
                if isinstance(reply, BaseException) or reply is None:
                    self.skipped += 1
                elif key in self.applied or key in keys:
                    self.duplicates += 1
                else:
                    keys.add(key)
                    gradients.append(reply[0])
                    compute_s = max(compute_s, reply[1])
        self.applied.update(keys)
        return gradients, asking_s, compute_s

    async def _run(self) -> None:
        while self.processed < self.total_batches:
            gradients, asking_s, compute_s = await self._gather_gradients()
            apply_started = time.perf_counter()
            self.weights = self.weights - self.learning_rate * np.mean(gradients, axis=0)
            apply_s = time.perf_counter() - apply_started
            self.processed += self.k
            self.updates.append(
                {
                    "t": time.monotonic() - self.started,
                    "processed": self.processed,
                    "update_s": asking_s + apply_s,
                    "compute_s": compute_s + apply_s,
                }
            )
            if len(self.updates) % self.eval_every == 0:
                self.evaluator.evaluate.remote(self.run, self.weights, self.processed)
        self.done.set()
