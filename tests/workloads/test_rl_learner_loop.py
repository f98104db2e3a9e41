"""The learner's loop without Ray: it runs `--updates-per-step` updates per env step that
comes in, keeps sampling within one fragment per runner of what it has learned, never stalls
on a rounding remainder, and ends an iteration once it has caught up with its env steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from workloads.rl import algorithm
from workloads.rl.algorithm import LearnerLoop
from workloads.rl.options import RlOptions
from workloads.rl.runners import Fragment


@pytest.fixture(autouse=True)
def stall_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """A learner left waiting for samples nobody was asked for gives up its iteration after
    STALL_S (None instead of a record): 1 s here, so such a deadlock fails a test at once
    instead of hanging it (the fake pool answers every request at the next look, so a loop
    that works never waits that long)."""
    monkeypatch.setattr(algorithm, "STALL_S", 1.0)


@dataclass
class FakeEpisode:
    id_: str
    steps: int
    reward: float
    is_done: bool

    def env_steps(self) -> int:
        return self.steps

    def get_return(self) -> float:
        return self.reward * self.steps


@dataclass
class FakePool:
    """Runners that answer each request at the next look, with fragments of episodes of
    `episode_steps`; `lost` runners never answer."""

    fragment_steps: int
    count: int = 2
    episode_steps: int = 200
    lost: set[int] = field(default_factory=set)
    restarts: int = 0
    requested: dict[int, int] = field(default_factory=dict)  # runner -> steps in flight
    sampled: dict[int, int] = field(default_factory=dict)  # runner -> steps so far
    dispatched: list[int] = field(default_factory=list)
    weights_put: list[int] = field(default_factory=list)
    most_in_flight: int = 0

    @property
    def runners(self) -> list[int]:
        return list(range(1, self.count + 1))

    @property
    def healthy(self) -> list[int]:
        return [runner for runner in self.runners if runner not in self.lost]

    def collect(self) -> list[Fragment]:
        fragments = []
        for runner in list(self.requested):
            if runner in self.lost:
                continue
            steps = self.requested.pop(runner)
            done = self.sampled.get(runner, 0)
            self.sampled[runner] = done + steps
            ends = (done + steps) % self.episode_steps == 0
            episode = FakeEpisode(f"{runner}-{done // self.episode_steps}", steps, -1.0, ends)
            fragments.append(Fragment(runner, [episode], [], steps))
        return fragments

    def watch(self, now: float) -> None:
        pass

    def probe(self, now: float) -> None:
        pass

    def dispatch(self, weights: Any, version: int, allowance: int) -> int:
        sent = 0
        for runner in self.healthy:
            in_flight = sum(self.requested.values())
            if runner in self.requested or in_flight + self.fragment_steps > allowance:
                continue
            if not self.weights_put or self.weights_put[-1] != version:
                weights()
                self.weights_put.append(version)
            self.requested[runner] = self.fragment_steps
            self.dispatched.append(runner)
            self.most_in_flight = max(self.most_in_flight, sum(self.requested.values()))
            sent += 1
        return sent

    def wait(self, timeout_s: float) -> None:
        pass

    def nodes(self) -> list[str]:
        return []

    def take_events(self) -> list[dict[str, Any]]:
        return []


class FakeAlgo:
    def __init__(self, options: RlOptions) -> None:
        self.config = type("Config", (), {"total_train_batch_size": options.batch_size,
                                          "n_step": 1, "gamma": 0.99,
                                          "replay_buffer_config": {}})()
        self.added: list[Any] = []
        self.updates = 0
        buffer, learner = self, self
        self.local_replay_buffer, self.learner_group = buffer, learner

    def add(self, episodes: list[Any]) -> None:
        self.added += episodes

    def sample(self, **kwargs: Any) -> list[Any]:
        return self.added[-1:]

    def update(self, **kwargs: Any) -> list[Any]:
        self.updates += 1
        return []

    def get_state(self, **kwargs: Any) -> dict[str, Any]:
        return {"learner": {"rl_module": {"version": self.updates}}}


def _loop(options: RlOptions, runners: int = 2) -> tuple[LearnerLoop, FakePool, FakeAlgo]:
    pool = FakePool(options.rollout_fragment, count=runners)
    algo = FakeAlgo(options)
    return LearnerLoop(algo, pool, options), pool, algo  # type: ignore[arg-type]


def test_updates_follow_the_env_steps_and_sampling_follows_the_learner() -> None:
    options = RlOptions(steps_per_iteration=100, rollout_fragment=50, learning_starts=200,
                        updates_per_step=1.0)
    loop, pool, algo = _loop(options)
    rows = [loop.iterate() for _ in range(5)]
    assert all(row is not None for row in rows)
    # two iterations of sampling only, then one update per env step past 200
    assert [row["updates"] for row in rows if row] == [0, 0, 100, 200, 300]
    assert algo.updates == 300 and loop.learned() == 500
    assert loop.sampled - loop.learned() <= 2 * 50  # never more than a fragment a runner ahead
    assert pool.most_in_flight <= 2 * 50
    assert sorted(set(pool.dispatched)) == [1, 2]
    # the weights go out once per version the runners are sent, not once per update
    assert len(pool.weights_put) < algo.updates


def test_fewer_updates_than_env_steps_never_leave_the_learner_waiting() -> None:
    options = RlOptions(steps_per_iteration=100, rollout_fragment=25, learning_starts=100,
                        updates_per_step=0.1, batch_size=32)
    loop, _, algo = _loop(options, runners=1)
    for _ in range(10):
        # no stall on a 5-step remainder (without one fragment allowed, the iteration
        # waits out STALL_S and returns None)
        assert loop.iterate() is not None
    assert loop.learned() >= 1000
    assert algo.updates == int((loop.sampled - 100) * 0.1)


def test_the_learner_goes_on_with_the_runner_left() -> None:
    options = RlOptions(steps_per_iteration=100, rollout_fragment=50, learning_starts=200)
    loop, pool, _ = _loop(options)
    loop.iterate()
    loop.iterate()
    pool.lost.add(2)
    rows = [loop.iterate() for _ in range(3)]
    assert [row["healthy_runners"] for row in rows if row] == [1, 1, 1]
    assert loop.learned() == 500


def test_training_returns_are_of_the_episodes_finished_in_the_iteration() -> None:
    options = RlOptions(steps_per_iteration=200, rollout_fragment=50, learning_starts=200)
    loop, _, _ = _loop(options, runners=1)
    first = loop.iterate()
    assert first is not None and first["episodes"] == 1
    assert first["train_return"] == pytest.approx(-200.0)  # 200 steps of reward -1
