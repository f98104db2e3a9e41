"""The env runners' periodic evaluation: runners evaluate at phases of their own, on
deterministic actions of their current policy."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from workloads.rl.algorithm import policy_module, sac_config
from workloads.rl.evaluation import (
    PENDING,
    deterministic_returns,
    evaluate_now,
    periodic_evaluation,
    phase,
)
from workloads.rl.options import RlOptions


def test_runners_evaluate_every_nth_episode_at_phases_of_their_own() -> None:
    phases = [phase(seed=0, runner=runner, every=24) for runner in range(1, 9)]
    assert all(0 <= p < 24 for p in phases) and len(set(phases)) > 1
    assert phases == [phase(seed=0, runner=runner, every=24) for runner in range(1, 9)]
    assert phases != [phase(seed=1, runner=runner, every=24) for runner in range(1, 9)]


@pytest.fixture(scope="module")
def runner() -> SimpleNamespace:
    """What the callback uses of an env runner: its config, its (inference) module, its
    index; the module built from the run's config as RLlib builds it."""
    options = RlOptions(hidden=16, env_runners=1)
    return SimpleNamespace(config=sac_config(options), module=policy_module(options),
                           worker_index=2)


def test_an_evaluation_is_deterministic_and_in_the_env_bounds(runner: SimpleNamespace) -> None:
    first = deterministic_returns(runner, 2, seed=5)
    assert len(first) == 2 and all(-2000 < r <= 0 for r in first)  # Pendulum: 200 steps ≤ 0
    assert deterministic_returns(runner, 2, seed=5) == first


def test_the_callback_evaluates_on_every_nth_episode_only(runner: SimpleNamespace) -> None:
    every = 3
    callback: Any = periodic_evaluation(every, 1, seed=0)()
    for _ in range(2 * every):
        callback.on_episode_end(env_runner=runner, env_index=0, episode=None)
    pending = getattr(runner, PENDING)
    assert len(pending) == 2
    offset = phase(0, runner.worker_index, every)
    assert [p["runner_episode"] for p in pending] == [
        n for n in range(1, 2 * every + 1) if (n + offset) % every == 0]
    assert all(p["runner"] == 2 and len(p["returns"]) == 1 for p in pending)


def test_the_final_evaluation_runs_for_seed_zero(runner: SimpleNamespace) -> None:
    """Seed 0 once gave the final evaluation an env seed of -1, which Gymnasium refuses: the
    run failed after its last iteration and wrote no summary."""
    final = evaluate_now(runner, episodes=1, seed=0)
    assert final["runner"] == 2 and len(final["returns"]) == 1
    assert evaluate_now(runner, episodes=1, seed=0)["returns"] == final["returns"]
