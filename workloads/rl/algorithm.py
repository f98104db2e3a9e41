"""RLlib SAC (torch, new API stack) for the RL workload: its config, the learner's loop, and
the Trainer actor that runs it.

Placement: the Trainer actor, which holds the Algorithm with its (local) learner and replay
buffer, asks for the learner pool's placement resource, so the learner runs on the on-demand
learner node (and its GPU when given); the env runners (workloads/rl/runners.py, started by
the driver) ask for the spot pool's resource, so they sample on spot nodes. Both resources
come from vocab/spot.py, which the spot lab and the spot cluster give their pools.

The learner's loop (`LearnerLoop`) replaces RLlib's synchronous SAC step, which waits for
every runner's fragment each round and then runs a fixed number of updates: here the learner
runs `--updates-per-step` updates for every env step that came in, from whichever runners
are up, and never waits on one runner (see RunnerPool). Losing one of two runners therefore
costs the learner nothing while the other keeps it fed.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Any

import ray

from vocab.spot import LEARNER_RESOURCE, ON_DEMAND_RESOURCE, SPOT_RESOURCE
from workloads.rl.checkpoint import pack_state, unpack_state
from workloads.rl.envs import env_descriptor, make_env
from workloads.rl.evaluation import evaluate_now, periodic_evaluation
from workloads.rl.options import RlOptions
from workloads.rl.runners import Fragment, RunnerPool, rllib_internal_deprecations_quiet

EVALUATION_TIMEOUT_S = 300.0
WAIT_S = 1.0
"""Longest single wait of an idle learner for a fragment (it then looks again)."""
STALL_S = 20.0
"""An iteration that has had no fragment for this long reports that it waits (a line)."""
PLACEMENT_RESOURCE = {"learner": LEARNER_RESOURCE, "on-demand": ON_DEMAND_RESOURCE,
                      "spot": SPOT_RESOURCE, "anywhere": None}


def placement(place: str) -> dict[str, float]:
    """The custom resources an actor asks for to land on `place` (one CPU's worth)."""
    resource = PLACEMENT_RESOURCE[place]
    return {resource: 1.0} if resource else {}


def trainer_options(options: RlOptions) -> dict[str, Any]:
    """Ray actor options of the Trainer: the learner's node, one CPU, its GPUs."""
    return {"num_cpus": 1, "num_gpus": options.learner_gpus,
            "resources": placement(options.learner_on), "max_restarts": 0}


def sac_config(options: RlOptions) -> Any:
    """The SACConfig of a run (hyper-parameters after the original system's learner: two hidden
    layers, one learning rate, τ, γ; α learned from 0.2). The Algorithm built from it has no remote
    env runners of its own: the driver's runners are built from the same config."""
    from ray.rllib.algorithms.sac import SACConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    hiddens = [options.hidden, options.hidden]
    env, env_config = env_descriptor(options.env, options.env_file)
    return (
        SACConfig()
        .environment(env, env_config=env_config)
        .framework("torch")
        .env_runners(
            num_env_runners=0,
            num_cpus_per_env_runner=1,
            custom_resources_per_env_runner=placement(options.runner_on),
            rollout_fragment_length=options.rollout_fragment,
            num_envs_per_env_runner=1,
        )
        # The learner lives in the Trainer actor (placed on the learner node).
        .learners(num_learners=0, num_gpus_per_learner=options.learner_gpus)
        .training(
            train_batch_size_per_learner=options.batch_size,
            num_steps_sampled_before_learning_starts=options.learning_starts,
            actor_lr=options.learning_rate,
            critic_lr=options.learning_rate,
            alpha_lr=options.learning_rate,
            initial_alpha=0.2,
            tau=options.tau,
            gamma=options.gamma,
            n_step=options.n_step,
            replay_buffer_config={"type": "EpisodeReplayBuffer", "capacity": 1_000_000},
        )
        # On the new API stack the networks are sized by the RLModule's model config (the
        # old policy_model_config/q_model_config keys are ignored there).
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=hiddens))
        # The original system's per-runner evaluation (workloads/rl/evaluation.py), not RLlib's
        # per-iteration one: every --eval-every-th episode of each runner, at its own phase.
        .callbacks(periodic_evaluation(options.eval_every, options.eval_episodes, options.seed))
        # no system-usage monitor (a thread sampling CPU and GPU use nobody reads)
        .debugging(seed=options.seed, log_sys_usage=False)
    )


def policy_module(options: RlOptions, learner_state: dict[str, Any] | None = None) -> Any:
    """The run's RLModule (policy, Q and target networks) built from its config in this
    process, without Ray; with `learner_state` (a checkpoint's, as `Trainer.state` wrote it)
    holding that state's weights."""
    from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_RL_MODULE, DEFAULT_MODULE_ID

    env = make_env(*env_descriptor(options.env, options.env_file))
    try:
        with rllib_internal_deprecations_quiet():
            module = sac_config(options).get_rl_module_spec(env=env).build()
    finally:
        env.close()
    if learner_state is not None:
        module.set_state(learner_state[COMPONENT_LEARNER][COMPONENT_RL_MODULE][DEFAULT_MODULE_ID])
    return module


class LearnerLoop:
    """Sampling and learning, interleaved: fragments from the runners go into the replay
    buffer as they come, the learner owes `--updates-per-step` updates for each env step past
    `--learning-starts` and runs them one at a time, handing out new fragments in between
    while the runners are at most one fragment each ahead of it."""

    def __init__(self, algo: Any, pool: RunnerPool, options: RlOptions) -> None:
        self.algo, self.pool, self.options = algo, pool, options
        self.sampled = 0  # env steps in the replay buffer, by this learner
        self.updates = 0
        self.episodes = 0
        self.open_returns: dict[str, float] = {}  # episode id -> return of its chunks so far
        self.finished: list[float] = []  # returns of episodes finished this iteration
        self.evaluations: list[dict[str, Any]] = []
        self.iteration_start: float | None = None
        self.last_fragment_at = time.time()
        self.times = {"update_s": 0.0, "wait_s": 0.0}
        self.weights_version = -1

    # --- accounting ------------------------------------------------------------------------

    def owed(self) -> int:
        """Updates due for the env steps sampled so far and not yet run."""
        learnable = self.sampled - self.options.learning_starts
        if learnable < 0:
            return 0
        return int(learnable * self.options.updates_per_step) - self.updates

    def learned(self) -> float:
        """Env steps the learner has caught up with: every step sampled up to
        `--learning-starts`, then those its updates have paid for."""
        if self.sampled <= self.options.learning_starts:
            return float(self.sampled)
        return self.options.learning_starts + self.updates / self.options.updates_per_step

    def allowance(self) -> int:
        """Env steps the runners may have in flight: one fragment per runner, less the steps
        sampled that the learner has not learned from yet; at least one fragment while the
        learner owes no update (it would wait for samples: with fewer than one update per
        env step, a remainder too small to pay an update can be left unlearned)."""
        fragment = self.options.rollout_fragment
        unlearned = max(0.0, self.sampled - self.learned())
        budget = int(len(self.pool.runners) * fragment - unlearned)
        return max(budget, fragment) if self.owed() <= 0 else budget

    # --- the loop --------------------------------------------------------------------------

    def iterate(self) -> dict[str, Any] | None:
        """Run until the learner has caught up with `--steps-per-iteration` more env steps
        (the runners keep sampling ahead meanwhile); returns the iteration's record, or None
        after STALL_S without a fragment (the iteration goes on at the next call)."""
        if self.iteration_start is None:
            self.iteration_start = self.learned()
            self.started = time.time()
            self.times = {"update_s": 0.0, "wait_s": 0.0}
        while True:
            fragments = self.pool.collect()
            for fragment in fragments:
                self.add(fragment)
            self.pool.watch(time.time())
            self.pool.probe(time.time())
            if self.learned() - self.iteration_start >= self.options.steps_per_iteration:
                self.iteration_start = None
                return self.record()
            sent = self.pool.dispatch(self.runner_weights, self.weights_version,
                                      self.allowance())
            if self.owed() > 0:
                self.update()
            elif not fragments and not sent:
                waited = time.time()
                self.pool.wait(WAIT_S)
                self.times["wait_s"] += time.time() - waited
                if time.time() - self.last_fragment_at > STALL_S:
                    self.last_fragment_at = time.time()
                    return None

    def add(self, fragment: Fragment) -> None:
        self.algo.local_replay_buffer.add(fragment.episodes)
        self.sampled += fragment.steps
        self.last_fragment_at = time.time()
        for episode in fragment.episodes:
            total = self.open_returns.pop(episode.id_, 0.0) + float(episode.get_return())
            if episode.is_done:
                self.finished.append(total)
                self.episodes += 1
            else:
                self.open_returns[episode.id_] = total
        self.evaluations += fragment.evaluations

    def update(self) -> None:
        from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME

        started = time.time()
        config = self.algo.config
        batch = self.algo.local_replay_buffer.sample(
            num_items=config.total_train_batch_size, n_step=config.n_step,
            gamma=config.gamma, beta=config.replay_buffer_config.get("beta"),
            sample_episodes=True, batch_length_T=0, lookback=0, min_batch_length_T=0)
        self.algo.learner_group.update(
            episodes=batch, timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: self.sampled})
        self.updates += 1
        self.weights_version = self.updates
        self.times["update_s"] += time.time() - started

    def runner_weights(self) -> dict[str, Any]:
        """The policy's weights as the runners take them (no sequence number: a runner
        always applies them, also after a new learner started its count again)."""
        from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_RL_MODULE

        state = self.algo.learner_group.get_state(
            components=f"{COMPONENT_LEARNER}/{COMPONENT_RL_MODULE}",
            inference_only=True)[COMPONENT_LEARNER]
        return {COMPONENT_RL_MODULE: state[COMPONENT_RL_MODULE]}

    def record(self) -> dict[str, Any]:
        finished, self.finished = self.finished, []
        evaluations, self.evaluations = self.evaluations, []
        wall = time.time() - self.started
        return {
            "env_steps": self.sampled,
            "updates": self.updates,
            "episodes": self.episodes,
            "train_return": sum(finished) / len(finished) if finished else None,
            "evaluations": evaluations,
            "eval_return": (sum(e["return"] for e in evaluations) / len(evaluations)
                            if evaluations else None),
            "eval_episodes": sum(len(e["returns"]) for e in evaluations),
            "healthy_runners": len(self.pool.healthy),
            "runners": len(self.pool.runners),
            "runner_restarts": self.pool.restarts,
            "runner_nodes": self.pool.nodes(),
            "runner_events": self.pool.take_events(),
            "iteration_s": wall,
            "update_s": self.times["update_s"],
            "wait_s": self.times["wait_s"],
        }


def _not_the_new_stack_notice(record: logging.LogRecord) -> bool:
    """RLlib warns at every build that SAC runs on its new API stack, the only one used."""
    return "on the new API stack" not in record.getMessage()


class Trainer:
    """The Algorithm on the learner's node, sampling with the driver's env runners; the
    driver calls `iterate()` and `state()`."""

    def __init__(self, options: RlOptions, runners: list[Any],
                 state: bytes | None = None) -> None:
        for name in ("ray.rllib.algorithms.algorithm_config", "ray.rllib.algorithms.sac.sac"):
            logging.getLogger(name).addFilter(_not_the_new_stack_notice)
        with rllib_internal_deprecations_quiet():
            self.algo = sac_config(options).build_algo()
        if state is not None:  # resume: weights, optimizers and α of a checkpoint
            self.algo.learner_group.set_state(unpack_state(state))
        self.options = options
        self.pool = RunnerPool(runners, options.rollout_fragment)
        self.loop = LearnerLoop(self.algo, self.pool, options)
        self.iteration = 0

    def node_id(self) -> str:
        return str(ray.get_runtime_context().get_node_id())

    def iterate(self) -> dict[str, Any]:
        """One training iteration (and the evaluations the runners finished meanwhile), as
        one record; or, after a while without samples, a record that says it waits."""
        row = self.loop.iterate()
        if row is None:
            return {"waiting": True, "healthy_runners": len(self.pool.healthy),
                    "runners": len(self.pool.runners), "env_steps": self.loop.sampled,
                    "runner_events": self.pool.take_events()}
        self.iteration += 1
        return {"iteration": self.iteration, **row}

    def final_evaluation(self) -> list[dict[str, Any]]:
        """Every healthy env runner evaluates the final policy (its --eval-episodes)."""
        from workloads.rl.runners import evaluate_fragment

        weights = ray.put(self.loop.runner_weights())
        calls = [runner.handle.apply.remote(
            evaluate_fragment, weights=weights,
            evaluate=partial(evaluate_now, episodes=self.options.eval_episodes,
                             seed=self.options.seed))
            for runner in self.pool.healthy]
        ready, _ = ray.wait(calls, num_returns=len(calls), timeout=EVALUATION_TIMEOUT_S)
        results = []
        for call in ready:
            try:
                results.append(ray.get(call))
            except ray.exceptions.RayError:  # lost at the very end: its evaluation with it
                continue
        return sorted(results, key=lambda result: result["runner"])

    def state(self) -> bytes:
        """The learner's state as a msgpack checkpoint: its module's weights (policy, Q and
        target networks, α) and its optimizers' state; not its metrics nor which modules it
        trains (a callable or a set, and the config says it anyway)."""
        from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_OPTIMIZER, COMPONENT_RL_MODULE

        state = self.algo.learner_group.get_state(components=[
            f"{COMPONENT_LEARNER}/{COMPONENT_RL_MODULE}",
            f"{COMPONENT_LEARNER}/{COMPONENT_OPTIMIZER}"])
        state[COMPONENT_LEARNER].pop("should_module_be_updated", None)
        return pack_state(state)

    def stop(self) -> None:
        self.algo.stop()


RemoteTrainer = ray.remote(Trainer)
