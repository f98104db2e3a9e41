"""The paper's preemption model: every refresh each worker's two-state Markov chain steps,
up→down with probability 1/(α·500) and down→up with 1/((1−α)·500), so it is up a fraction
α of the time. Each worker's chain depends on the seed only, so a `markov` run and a `kill`
run of the same seed see the same schedule, and the lab and the simulator see the same one.

Each worker's draws come from its own generator, taken in blocks (a block of draws is the
same numbers as as many single draws), and all workers step at once."""

from __future__ import annotations

import numpy as np

STEPS_SCALE = 500.0
BLOCK = 256
"""Chain steps drawn at a time per worker."""


class MarkovAvailability:
    def __init__(self, workers: int, alpha: float, seed: int) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        self.p_down = 1.0 / (alpha * STEPS_SCALE)
        self.p_up = 0.0 if alpha >= 1.0 else 1.0 / ((1.0 - alpha) * STEPS_SCALE)
        self._rngs = [np.random.default_rng([seed, 7919, worker]) for worker in range(workers)]
        self._state = np.ones(workers, dtype=bool)
        self._draws = np.empty((0, workers))
        self._next = 0

    @property
    def up(self) -> list[bool]:
        return self._state.tolist()

    def step(self) -> list[bool]:
        """Advance every chain by one refresh; returns who is up now."""
        if self._next >= len(self._draws):
            self._draws = np.stack([rng.random(BLOCK) for rng in self._rngs], axis=1) \
                if self._rngs else np.empty((BLOCK, 0))
            self._next = 0
        draw = self._draws[self._next]
        self._next += 1
        self._state = np.where(self._state, draw >= self.p_down, draw < self.p_up)
        return self._state.tolist()
