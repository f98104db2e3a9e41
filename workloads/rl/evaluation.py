"""The original system's periodic evaluation, on the env runners (an RLlib callback): every runner
evaluates its current policy after every `every`-th episode it samples, shifted by a random
phase of its own (so runners do not evaluate together), with `episodes` deterministic episodes
in an environment of its own (the sampling env is left mid-episode as it is). Results wait on
the runner until the Trainer collects them after an iteration (`collect`).

Deterministic action: the squashed Gaussian's mean, tanh(μ), mapped from [-1, 1] to the
action space's bounds as the env runner maps sampled actions (RLlib's `to_deterministic` of
this distribution leaves μ unsquashed).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from ray.rllib.callbacks.callbacks import RLlibCallback

from workloads.rl.envs import make_env

PENDING = "spotburst_evaluations"
"""The env runner's attribute holding evaluations not yet collected."""


def phase(seed: int, runner: int, every: int) -> int:
    """The random phase (0 .. every-1) of env runner `runner` (its worker index)."""
    return random.Random(f"{seed}:{runner}").randrange(every)


def policy_returns(module: Any, env_id: Any, normalize_actions: bool, seeds: list[int],
                   on_episode: Callable[[int, float], None] | None = None,
                   env_config: dict[str, Any] | None = None) -> list[float]:
    """One episode per env seed of `module`'s deterministic policy, acting on tanh(μ) (mapped
    to the action space's bounds when `normalize_actions`, as the env runners map theirs), in
    a new env; `on_episode(index, return)` after each."""
    import numpy as np
    import torch
    from ray.rllib.core.columns import Columns
    from ray.rllib.utils.spaces.space_utils import unsquash_action

    env = make_env(env_id, env_config)
    returns = []
    try:
        for index, seed in enumerate(seeds):
            observation, _ = env.reset(seed=seed)
            total, done = 0.0, False
            while not done:
                batch = {Columns.OBS: torch.as_tensor(np.asarray(observation, np.float32)[None])}
                with torch.no_grad():
                    inputs = module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS]
                mean = inputs[0, : inputs.shape[1] // 2]
                action = torch.tanh(mean).numpy()
                if normalize_actions:
                    action = unsquash_action(action, env.action_space)
                observation, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
            if on_episode is not None:
                on_episode(index, total)
    finally:
        env.close()
    return returns


def deterministic_returns(env_runner: Any, episodes: int, seed: int) -> list[float]:
    """`episodes` episodes of the runner's current policy (env seeds seed, seed + 1, ...)."""
    config = env_runner.config
    return policy_returns(env_runner.module, config.env, config.normalize_actions,
                          [seed + episode for episode in range(episodes)],
                          env_config=dict(config.env_config))


FINAL_EPISODE = 1_000_000
"""The episode slot of the final evaluation's seed (past any periodic evaluation's)."""


def evaluation_seed(seed: int, runner: int, episode: int) -> int:
    """The env seed of an evaluation: distinct per run seed, runner and episode, never
    negative (Gymnasium refuses negative seeds)."""
    return (seed * 1_000_003 + runner * 1009 + episode) % 2**31


def periodic_evaluation(every: int, episodes: int, seed: int) -> type[RLlibCallback]:
    """The callback class for `config.callbacks(...)` with these settings."""

    class PeriodicEvaluation(RLlibCallback):
        def on_episode_end(self, *, env_runner: Any = None, **kwargs: Any) -> None:
            if env_runner is None or env_runner.worker_index == 0:  # the Trainer's own runner
                return
            done = getattr(env_runner, "spotburst_episodes", 0) + 1
            env_runner.spotburst_episodes = done
            if (done + phase(seed, env_runner.worker_index, every)) % every:
                return
            returns = deterministic_returns(
                env_runner, episodes, evaluation_seed(seed, env_runner.worker_index, done))
            pending = getattr(env_runner, PENDING, [])
            pending.append({"runner": env_runner.worker_index, "runner_episode": done,
                            "returns": returns, "return": sum(returns) / len(returns)})
            setattr(env_runner, PENDING, pending)

    return PeriodicEvaluation


def evaluate_now(env_runner: Any, episodes: int, seed: int) -> dict[str, Any]:
    """An evaluation of the runner's current policy now (the run's final one)."""
    returns = deterministic_returns(
        env_runner, episodes, evaluation_seed(seed, env_runner.worker_index, FINAL_EPISODE))
    return {"runner": env_runner.worker_index,
            "runner_episode": getattr(env_runner, "spotburst_episodes", 0),
            "returns": returns, "return": sum(returns) / len(returns)}


def take_pending(env_runner: Any) -> list[dict[str, Any]]:
    """An env runner's evaluations since the last call (run on the runner)."""
    pending: list[dict[str, Any]] = getattr(env_runner, PENDING, [])
    setattr(env_runner, PENDING, [])
    return pending
