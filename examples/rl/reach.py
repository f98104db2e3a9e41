"""An environment for `invoke run-rl --env`: a point on a line moves toward a target.

Run SAC on it, its env runners on spot nodes that are preempted (see docs/rl.md, "Your own
environment"):

    invoke run-rl --env examples/rl/reach.py:Reach --steps 2000 --eval-every 4

A `gymnasium.Env` subclass with a Box action space (SAC's actions are continuous), made with
no arguments. The file travels with the job to every env runner and the learner; what it
imports must be installed there (`--requirements FILE` on a remote cluster).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

STEPS = 30
SPEED = 0.25


class Reach(gymnasium.Env[np.ndarray, np.ndarray]):
    """Observation: (position, target), both in [-1, 1]; action: a move in [-1, 1] (times
    0.25); reward: minus the distance to the target after the move; 30 steps an episode.
    A random policy scores about -15, one that goes straight to the target about -2."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.position = 0.0
        self.target = 0.0
        self.steps = 0

    def _observation(self) -> np.ndarray:
        return np.array([self.position, self.target], np.float32)

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.position, self.target = (float(v) for v in self.np_random.uniform(-1, 1, 2))
        self.steps = 0
        return self._observation(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        move = float(np.clip(np.asarray(action, np.float32).reshape(-1)[0], -1.0, 1.0))
        self.position = float(np.clip(self.position + SPEED * move, -1.0, 1.0))
        self.steps += 1
        reward = -abs(self.position - self.target)
        return self._observation(), reward, False, self.steps >= STEPS, {}
