"""The RL workload's options: the one spec its argparse, `invoke run-rl` and the launcher's
command line are made from (see workloads/common/options.py). Flag names stay clear of the
spot lab's (`--spot`, `--learner`, ...) and the target's (`--address`, `--stack`, `--out`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vocab.names import fits_file_system, shown
from workloads.common.options import OptionError, OptionSpec, check_fields, option
from workloads.common.results import ResultsOptions

LEARNER_PLACES = ("learner", "on-demand", "anywhere")
"""Where the learner goes: the learner pool's node (on-demand, a GPU node on AWS), any
on-demand worker node, or wherever Ray finds a CPU (a plain cluster without pools)."""
RUNNER_PLACES = ("spot", "on-demand", "anywhere")
ENV_FLAG = "--env"
"""The flag every error about the environment names (workloads/rl/envs.py)."""


@dataclass(frozen=True, kw_only=True)
class RlOptions(ResultsOptions):
    env: str = option(
        "Pendulum-v1", "Gymnasium environment id (Gymnasium's module:EnvId form too), or your "
        "own FILE.py:CLASS (a gymnasium.Env subclass; the file travels with the job); "
        "continuous actions: a Box action space"
    )
    env_file: Path | None = option(
        None, "where the --env FILE.py is for this run (the copy the job carries)",
        launcher=True,
    )
    env_runners: int = option(2, "env runners (Ray actors sampling the environment)", minimum=1,
                              maximum=64)
    steps: int = option(4000, "env steps to sample in all (the run ends past this)", minimum=1)
    seed: int = option(0, "seed of the environments and the networks (RLlib's seed)", minimum=0)
    runner_on: str = option("spot", "where env runners are placed (a node pool's placement "
                            "resource)", choices=RUNNER_PLACES)
    learner_on: str = option("learner", "where the learner is placed", choices=LEARNER_PLACES)
    learner_gpus: float = option(0.0, "GPUs of the learner (its pool's GPU on AWS)", minimum=0.0,
                                 maximum=8.0)
    steps_per_iteration: int = option(
        100, "env steps sampled and learned from per training iteration (all runners "
        "together)", minimum=1
    )
    rollout_fragment: int = option(
        50, "env steps a runner samples per request", minimum=1
    )
    learning_starts: int = option(200, "env steps sampled before the first update", minimum=0)
    batch_size: int = option(128, "SAC train batch (transitions per update)", minimum=1)
    updates_per_step: float = option(
        1.0, "learner updates (of --batch-size transitions each) per env step sampled "
        "(the learner runs them as the steps come in, from whichever runners are up)",
        above=0.0,
    )
    n_step: int = option(1, "n-step returns of the Q targets", minimum=1, maximum=10)
    hidden: int = option(128, "units of each of the two hidden layers (policy and Q, as in "
                         "Learn-to-Race distributed training)", minimum=1, maximum=4096)
    learning_rate: float = option(1e-3, "actor, critic and α learning rate", above=0.0)
    gamma: float = option(0.99, "discount γ", above=0.0, maximum=1.0)
    tau: float = option(0.005, "target-network update rate τ", above=0.0, maximum=1.0)
    eval_every: int = option(
        2, "episodes of each env runner between its evaluations (each runner at a random "
        "phase of its own)", minimum=1,
    )
    eval_episodes: int = option(2, "deterministic episodes per evaluation", minimum=1)
    checkpoint_every: int = option(
        5, "iterations between learner checkpoints checkpoints/iter_<n>/", minimum=1
    )
    on_demand_price: float = option(
        0.286, "$ per on-demand node-hour (head, learner), for the run's cost (and the local "
        "lab's bill)", minimum=0.0,
    )
    spot_price: float = option(0.0858, "$ per spot node-hour while up, for the run's cost",
                               minimum=0.0)
    preset: str | None = option(
        None, "a named set of the options above: paper (the learner and evaluation of "
        "Learn-to-Race distributed training, at its scale: tens of thousands of env steps); "
        "flags given beside it win",
        choices=("paper",))

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.env.strip():
            raise OptionError("--env", "expected a Gymnasium environment id, got ''")
        if self.rollout_fragment > self.steps_per_iteration:
            raise OptionError("--rollout-fragment", f"expected at most --steps-per-iteration "
                              f"({self.steps_per_iteration}), got {self.rollout_fragment}")

    def parameters(self) -> dict[str, Any]:
        values = asdict(self)
        values["env_file"] = None if self.env_file is None else str(self.env_file)
        return values


PAPER_PRESET: dict[str, Any] = {
    # the original's learner: SAC with two hidden layers of 256, one learning rate of 5e-4,
    # τ 0.01, γ 0.99, batches of 128, min(len(buffer) // 8, 64) updates per episode a
    # worker sends (one update per 8 env steps); each worker sends whole episodes
    "hidden": 256, "learning_rate": 5e-4, "tau": 0.01, "gamma": 0.99, "batch_size": 128,
    "updates_per_step": 0.125, "rollout_fragment": 200, "learning_starts": 200,
    # its evaluation: every 24th episode of each worker, 2 deterministic episodes
    "eval_every": 24, "eval_episodes": 2,
    # and its scale: a long run, logged and checkpointed less often
    "steps": 40_000, "steps_per_iteration": 1000, "checkpoint_every": 10,
}
"""`--preset paper`: the original's settings where this workload has them (α is learned
here, not its fixed 0.2)."""

RL_SPEC = OptionSpec(
    RlOptions,
    prog="python -m workloads.rl",
    description="Distributed SAC (RLlib, torch) with the learner on an on-demand node and env "
    "runners on spot nodes; evaluations, checkpoints and rewards.jsonl in the run's storage; "
    "writes summary.json, provenance.json and records/.",
    presets={"paper": PAPER_PRESET},
    renamed={"--price-on-demand": "--on-demand-price", "--price-spot": "--spot-price"},
)


CHECKPOINT_CHOICES_HELP = (
    "which checkpoint of the run: best (its best evaluation), last (its last "
    "iter_<n>), or a name such as best_-63.2_30 or iter_20"
)


@dataclass(frozen=True, kw_only=True)
class RlEvaluateOptions:
    """`invoke rl-evaluate`: a checkpoint's policy on new episodes, on this machine."""

    run: str | None = option(None, "an RL run's results folder (results/rl/<timestamp>)")
    checkpoint: str = option("best", CHECKPOINT_CHOICES_HELP)
    episodes: int = option(10, "deterministic episodes, one per env seed", minimum=1,
                           maximum=10_000)
    seed: int = option(0, "env seed of the first episode (episode i: seed + i)", minimum=0)
    out: str | None = option(None, "results folder (not set: results/rl-evaluate/<timestamp>)")
    env: str | None = option(
        None, "the run's environment when it is code to import (FILE.py:CLASS, or Gymnasium's "
        "module:EnvId form), exactly as the run recorded it: a checkpoint's env code is "
        "imported only when named here too (a checkpoint from elsewhere never runs code on "
        "its own); Gymnasium's own ids need nothing")

    def __post_init__(self) -> None:
        check_fields(self)
        if not (self.run or "").strip():
            raise OptionError("--run", "expected an RL run's results folder, got none")
        for flag, path in (("--run", self.run), ("--out", self.out)):
            if path is not None and not fits_file_system(path):
                raise OptionError(flag, f"expected a path whose parts fit the file system "
                                  f"(at most 255 bytes each), got {shown(path)}")
        if not self.checkpoint.strip():
            raise OptionError("--checkpoint", "expected best, last or a checkpoint name, got ''")

    def parameters(self) -> dict[str, Any]:
        return asdict(self)


RL_EVALUATE_SPEC = OptionSpec(
    RlEvaluateOptions,
    prog="python -m workloads.rl.evaluate_checkpoint",
    description="Load a checkpoint of an RL run (msgpack, never unpickled) into the run's "
    "policy network, built from the options it recorded, and run deterministic episodes on "
    "new env seeds; writes summary.json, provenance.json and records/episodes.jsonl.",
)
