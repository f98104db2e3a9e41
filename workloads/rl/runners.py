"""The env runners: RLlib's SingleAgentEnvRunner as Ray actors on spot nodes, owned by the
run's driver, and the learner's view of them (`RunnerPool`).

The driver starts them (`start_runners`), so they outlive a lost learner: a new learner is
handed the same runners and goes on sampling with them. Ray restarts a runner whose node was
lost on any node with the placement resource, as often as it takes (`max_restarts=-1`); a
sample in flight on a lost node is not retried (`max_task_retries=0`): the learner goes on
with the samples of the other runners.

The learner never waits on one runner. Each healthy runner has at most one request in flight
— sample one fragment, with the learner's newest weights sent along (one object per weights
version, put once, read by every runner it goes to) — and the pool hands out a new one only
while the samples the learner has not yet learned from stay within its allowance, so
sampling follows the learner's pace. A runner is out of service as soon as a request to it
fails or Ray's actor table shows it restarting (or restarted) — also one with nothing in
flight; a ping sent right away returns when Ray has it up again, and its next request
carries the weights. Every step is an event with its wall time: `lost`, `back` (restarted),
`sampling` (its first fragment after coming back).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import RayError

from workloads.common import ray_private
from workloads.common.actors import start_actor
from workloads.rl.evaluation import take_pending

PING_RETRY_S = 1.0
"""How long after a failed ping (the runner not yet known dead) the next is sent."""
WATCH_S = 0.5
"""How often the pool reads its runners' state from Ray's actor table (a runner with no
request in flight is lost without any call failing)."""


def runner_actor_options(resources: dict[str, float]) -> dict[str, Any]:
    return {"num_cpus": 1, "resources": resources, "max_restarts": -1, "max_task_retries": 0}


@contextmanager
def rllib_internal_deprecations_quiet() -> Iterator[None]:
    """RLlib's own RLModuleSpec.build calls a constructor RLlib deprecated and warns about it
    in every process that builds the module (each runner, at every restart): nothing the
    user can act on."""
    logger = logging.getLogger(ray_private.deprecation_logger_name())
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def start_runners(config: Any, count: int, resources: dict[str, float]) -> list[Any]:
    """`count` env runner actors built from the RLlib `config` (indices 1..count, as RLlib
    numbers its remote runners: seeds and evaluation phases follow them)."""
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    class EnvRunner(SingleAgentEnvRunner):  # type: ignore[misc]
        def __init__(self, **kwargs: Any) -> None:
            with rllib_internal_deprecations_quiet():
                super().__init__(**kwargs)

    remote = ray.remote(EnvRunner)
    return [start_actor(remote, config=config, worker_index=index, num_workers=count,
                        options=runner_actor_options(resources))
            for index in range(1, count + 1)]


def sample_fragment(env_runner: Any, weights: dict[str, Any] | None = None) -> dict[str, Any]:
    """On the runner: take the learner's weights (when sent), sample one fragment, and
    return it with the evaluations finished meanwhile and where it ran."""
    if weights is not None:
        env_runner.set_state(weights)
    started = time.time()
    episodes = env_runner.sample()
    env_runner.get_metrics()  # reduced and dropped: the runner's own logs stay small
    return {"episodes": episodes, "evaluations": take_pending(env_runner),
            **ping_runner(env_runner), "sample_s": time.time() - started}


def evaluate_fragment(env_runner: Any, weights: dict[str, Any],
                      evaluate: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """On the runner: take the learner's weights, then `evaluate(env_runner)`."""
    env_runner.set_state(weights)
    return evaluate(env_runner)


def ping_runner(env_runner: Any) -> dict[str, Any]:
    """Where the runner is: its node, process and actor."""
    context = ray.get_runtime_context()
    return {"node": str(context.get_node_id()), "pid": os.getpid(),
            "actor": str(context.get_actor_id())}


@dataclass
class Runner:
    index: int
    handle: Any
    healthy: bool = True
    request: Any = None  # the sample in flight
    request_steps: int = 0
    dispatched_at: float = 0.0
    ping: Any = None  # the restart probe in flight
    ping_after: float = 0.0
    node: str | None = None
    pid: int | None = None
    actor: str | None = None  # its id in Ray's actor table, once it has answered
    restarts_seen: int = 0  # Ray's restart count of it when last seen in service
    coming_back: bool = False  # back after a loss, first fragment not yet in


@dataclass
class Fragment:
    runner: int
    episodes: list[Any]
    evaluations: list[dict[str, Any]]
    steps: int


@dataclass
class RunnerPool:
    """The learner's side of the env runners (see the module docstring)."""

    handles: list[Any]
    fragment_steps: int
    runners: list[Runner] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    restarts: int = 0
    watched_at: float = 0.0
    weights_ref: Any = None
    weights_version: int | None = None

    def __post_init__(self) -> None:
        self.runners = [Runner(index, handle) for index, handle in
                        enumerate(self.handles, start=1)]

    # --- what the learner asks -------------------------------------------------------------

    @property
    def healthy(self) -> list[Runner]:
        return [runner for runner in self.runners if runner.healthy]

    def in_flight_steps(self) -> int:
        return sum(runner.request_steps for runner in self.runners if runner.request)

    def nodes(self) -> list[str]:
        """The node of each healthy runner that has sampled (sorted)."""
        return sorted(runner.node for runner in self.healthy if runner.node)

    def take_events(self) -> list[dict[str, Any]]:
        events, self.events = self.events, []
        return events

    # --- requests --------------------------------------------------------------------------

    def dispatch(self, weights: Callable[[], dict[str, Any]], version: int,
                 allowance: int) -> int:
        """A new fragment for healthy, idle runners (the one served longest ago first)
        while the steps in flight stay within `allowance` (a runner back in service gets its
        first one regardless), with the learner's weights: `weights()` is put in the object
        store once per `version`, and every request carries that one object. Returns the
        requests sent."""
        sent = 0
        # the runner served longest ago first: runners take turns, and one back in service
        # gets the next request
        idle = sorted((runner for runner in self.healthy if runner.request is None),
                      key=lambda runner: runner.dispatched_at)
        for runner in idle:
            # a runner back in service gets its first request at once, the others wait
            # for the allowance
            if (self.in_flight_steps() + self.fragment_steps > allowance
                    and not runner.coming_back):
                continue
            if version != self.weights_version:
                self.weights_ref, self.weights_version = ray.put(weights()), version
            runner.request = runner.handle.apply.remote(sample_fragment,
                                                        weights=self.weights_ref)
            runner.request_steps = self.fragment_steps
            runner.dispatched_at = time.time()
            sent += 1
        return sent

    def probe(self, now: float) -> None:
        """A ping to each runner out of service without one in flight: it returns once Ray
        has restarted the runner."""
        for runner in self.runners:
            if not runner.healthy and runner.ping is None and now >= runner.ping_after:
                runner.ping = runner.handle.apply.remote(ping_runner)

    def watch(self, now: float) -> None:
        """Every WATCH_S, each runner in service as Ray's actor table has it: one that is
        restarting, dead, or restarted since it was last seen is lost (its request in flight,
        if any, is given up)."""
        if now - self.watched_at < WATCH_S:
            return
        self.watched_at = now
        for runner in self.healthy:
            if runner.actor is None:
                continue
            info = ray_private.actor_info(runner.actor)
            restarts = int(info.get("NumRestarts", 0))
            if info.get("State") != "ALIVE" or restarts > runner.restarts_seen:
                runner.restarts_seen = restarts
                runner.request, runner.request_steps = None, 0
                self._lost(runner, f"actor {info.get('State', 'unknown').lower()}", now)

    def wait(self, timeout_s: float) -> None:
        """Until any request or ping finishes, or `timeout_s`."""
        pending = [ref for runner in self.runners for ref in (runner.request, runner.ping)
                   if ref is not None]
        if pending:
            ray.wait(pending, num_returns=1, timeout=timeout_s)
            return
        # nothing in flight: only pings held back after a failed one (PING_RETRY_S)
        retry_at = min((runner.ping_after for runner in self.runners if not runner.healthy),
                       default=time.time() + timeout_s)
        time.sleep(max(0.0, min(timeout_s, retry_at - time.time())))

    def collect(self) -> list[Fragment]:
        """The fragments that are in (without waiting); runners whose request failed are
        taken out of service, runners whose ping returned are back in."""
        fragments = []
        now = time.time()
        for runner in self.runners:
            if runner.ping is not None and _ready(runner.ping):
                try:
                    where = ray.get(runner.ping)
                except RayError:
                    runner.ping_after = now + PING_RETRY_S
                else:
                    self._back(runner, where, now)
                runner.ping = None
            if runner.request is not None and _ready(runner.request):
                request, runner.request, runner.request_steps = runner.request, None, 0
                try:
                    result = ray.get(request)
                except RayError as error:
                    self._lost(runner, type(error).__name__, now)
                    continue
                fragments.append(self._fragment(runner, result, now))
        return fragments

    # --- a runner's life -------------------------------------------------------------------

    def _fragment(self, runner: Runner, result: dict[str, Any], now: float) -> Fragment:
        if runner.coming_back:
            runner.coming_back = False
            self._event("sampling", runner, now, node=result["node"],
                        dispatched=runner.dispatched_at)
        self._where(runner, result)
        episodes = result["episodes"]
        return Fragment(runner.index, episodes, result["evaluations"],
                        sum(episode.env_steps() for episode in episodes))

    def _lost(self, runner: Runner, cause: str, now: float) -> None:
        runner.healthy = False
        runner.ping_after = now
        self._event("lost", runner, now, node=runner.node, cause=cause)

    def _back(self, runner: Runner, where: dict[str, Any], now: float) -> None:
        runner.healthy, runner.coming_back = True, True
        self.restarts += 1
        self._where(runner, where, restarted=True)
        self._event("back", runner, now, node=where["node"])

    def _where(self, runner: Runner, where: dict[str, Any], restarted: bool = False) -> None:
        """Where a runner answered from; Ray's restart count of it when it first answers and
        when it is back (so the next watch knows which restarts it has seen)."""
        first = runner.actor is None
        runner.node, runner.pid, runner.actor = where["node"], where["pid"], where["actor"]
        if first or restarted:
            info = ray_private.actor_info(runner.actor)
            runner.restarts_seen = int(info.get("NumRestarts", 0))

    def _event(self, kind: str, runner: Runner, now: float, **details: Any) -> None:
        self.events.append({"event": kind, "runner": runner.index, "t": now, **details})


def _ready(ref: Any) -> bool:
    ready, _ = ray.wait([ref], timeout=0)
    return bool(ready)
