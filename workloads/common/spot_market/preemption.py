"""The paper's preemption model: every refresh each worker's two-state Markov chain steps,
up→down with probability 1/(α·500) and down→up with 1/((1−α)·500), so it is up a fraction
α of the time. Each worker's chain depends on the seed only, so a `markov` run and a `kill`
run of the same seed see the same schedule."""

from __future__ import annotations

import numpy as np

STEPS_SCALE = 500.0


class MarkovAvailability:
    def __init__(self, workers: int, alpha: float, seed: int) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        self.p_down = 1.0 / (alpha * STEPS_SCALE)
        self.p_up = 0.0 if alpha >= 1.0 else 1.0 / ((1.0 - alpha) * STEPS_SCALE)
        self._rngs = [np.random.default_rng([seed, 7919, worker]) for worker in range(workers)]
        self.up = [True] * workers

    def step(self) -> list[bool]:
        """Advance every chain by one refresh; returns who is up now."""
        for worker, rng in enumerate(self._rngs):
            draw = rng.random()
            if self.up[worker]:
                self.up[worker] = draw >= self.p_down
            else:
                self.up[worker] = draw < self.p_up
        return list(self.up)
