"""RLlib SAC (torch, new API stack) for the RL workload, and the Trainer actor that runs it.

Placement: the Trainer actor, which holds the Algorithm with its (local) learner and replay
buffer, asks for the learner pool's placement resource, so the learner runs on the on-demand
learner node (and its GPU when given); the env runners ask for the spot pool's resource, so
they sample on spot nodes. Both resources come from vocab/spot.py, which the spot lab and the
spot cluster give their pools. When a spot node is preempted its runners die; Ray restarts
them (max restarts from RLlib's fault tolerance) once a spot node is back, RLlib pings them
back into service, and training goes on with the healthy ones meanwhile.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Any

import ray

from vocab.spot import LEARNER_RESOURCE, ON_DEMAND_RESOURCE, SPOT_RESOURCE
from workloads.rl.checkpoint import pack_state, unpack_state
from workloads.rl.evaluation import evaluate_now, periodic_evaluation, take_pending
from workloads.rl.options import RlOptions

EVALUATION_TIMEOUT_S = 300.0
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


def training_intensity(options: RlOptions) -> float:
    """RLlib's training_intensity for --updates-per-step: RLlib runs intensity · fragment ·
    (runners + 1) / batch updates after each sampling round of fragment · runners env steps
    (rllib/algorithms/dqn/dqn.py calculate_rr_weights)."""
    runners = options.env_runners
    return options.updates_per_step * options.batch_size * runners / (runners + 1)


def sac_config(options: RlOptions) -> Any:
    """The SACConfig of a run (hyper-parameters after the seed's learner: two hidden layers,
    one learning rate, τ, γ; α learned from 0.2)."""
    from ray.rllib.algorithms.sac import SACConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    hiddens = [options.hidden, options.hidden]
    return (
        SACConfig()
        .environment(options.env)
        .framework("torch")
        .env_runners(
            num_env_runners=options.env_runners,
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
            training_intensity=training_intensity(options),
            n_step=options.n_step,
            replay_buffer_config={"type": "EpisodeReplayBuffer", "capacity": 1_000_000},
        )
        # On the new API stack the networks are sized by the RLModule's model config (the
        # old policy_model_config/q_model_config keys are ignored there).
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=hiddens))
        .reporting(min_time_s_per_iteration=0,
                   min_sample_timesteps_per_iteration=options.steps_per_iteration)
        .fault_tolerance(
            restart_failed_env_runners=True,
            max_num_env_runner_restarts=1000,
            delay_between_env_runner_restarts_s=options.restart_delay_s,
            env_runner_health_probe_timeout_s=options.probe_timeout_s,
            num_consecutive_env_runner_failures_tolerance=1000,
        )
        # The seed's per-runner evaluation (workloads/rl/evaluation.py), not RLlib's
        # per-iteration one: every --eval-every-th episode of each runner, at its own phase.
        .callbacks(periodic_evaluation(options.eval_every, options.eval_episodes, options.seed))
        .debugging(seed=options.seed)
    )


def policy_module(options: RlOptions, learner_state: dict[str, Any] | None = None) -> Any:
    """The run's RLModule (policy, Q and target networks) built from its config in this
    process, without Ray; with `learner_state` (a checkpoint's, as `Trainer.state` wrote it)
    holding that state's weights."""
    import gymnasium
    from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_RL_MODULE, DEFAULT_MODULE_ID

    env = gymnasium.make(options.env)
    deprecation_logger = logging.getLogger("ray._common.deprecation")
    level = deprecation_logger.level
    deprecation_logger.setLevel(logging.ERROR)  # spec.build's own deprecated call warns
    try:
        module = sac_config(options).get_rl_module_spec(env=env).build()
    finally:
        deprecation_logger.setLevel(level)
        env.close()
    if learner_state is not None:
        module.set_state(learner_state[COMPONENT_LEARNER][COMPONENT_RL_MODULE][DEFAULT_MODULE_ID])
    return module


def _mean(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number else None  # NaN: no episode finished


class Trainer:
    """The Algorithm on the learner's node; the driver calls `iterate()` and `state()`."""

    def __init__(self, options: RlOptions, state: bytes | None = None) -> None:
        self.algo = sac_config(options).build_algo()
        self.probe_timeout_s = options.probe_timeout_s
        self.eval_episodes, self.seed = options.eval_episodes, options.seed
        if state is not None:  # resume: weights, optimizers and α of a checkpoint
            self.algo.learner_group.set_state(unpack_state(state))
            self.algo.env_runner_group.sync_weights(
                from_worker_or_learner_group=self.algo.learner_group, inference_only=True)

    def node_id(self) -> str:
        return str(ray.get_runtime_context().get_node_id())

    def iterate(self) -> dict[str, Any]:
        """One training iteration (and its evaluation, when due), as one record."""
        started = time.time()
        result = self.algo.train()
        runners = result.get("env_runners", {})
        evaluations = [evaluation for pending in self.algo.env_runner_group.foreach_env_runner(
            take_pending, local_env_runner=False, timeout_seconds=self.probe_timeout_s)
            for evaluation in pending]
        group = self.algo.env_runner_group
        return {
            "iteration": int(result["training_iteration"]),
            "env_steps": int(runners.get("num_env_steps_sampled_lifetime", 0)),
            "episodes": int(runners.get("num_episodes_lifetime", 0)),
            "train_return": _mean(runners.get("episode_return_mean")),
            "evaluations": evaluations,
            "eval_return": (sum(e["return"] for e in evaluations) / len(evaluations)
                            if evaluations else None),
            "eval_episodes": sum(len(e["returns"]) for e in evaluations),
            "healthy_runners": int(group.num_healthy_remote_workers()),
            "runners": int(group.num_remote_workers()),
            "runner_restarts": int(group.num_remote_worker_restarts()),
            "runner_nodes": self.runner_nodes(),
            "iteration_s": time.time() - started,
        }

    def final_evaluation(self) -> list[dict[str, Any]]:
        """Every healthy env runner evaluates the final policy (its --eval-episodes)."""
        self.algo.env_runner_group.sync_weights(
            from_worker_or_learner_group=self.algo.learner_group, inference_only=True)
        return list(self.algo.env_runner_group.foreach_env_runner(
            partial(evaluate_now, episodes=self.eval_episodes, seed=self.seed),
            local_env_runner=False, timeout_seconds=EVALUATION_TIMEOUT_S))

    def runner_nodes(self) -> list[str]:
        """The Ray node of each healthy env runner."""
        nodes = self.algo.env_runner_group.foreach_env_runner(
            lambda runner: ray.get_runtime_context().get_node_id(), local_env_runner=False,
            timeout_seconds=self.probe_timeout_s)
        return sorted(str(node) for node in nodes)

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
