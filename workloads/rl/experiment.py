"""The driver of an RL run: start the Trainer on the learner's node, iterate until the env
steps are done, evaluate, checkpoint, follow the spot nodes, and write the results folder.

Everything the run writes goes to its storage (a local folder or an S3 prefix): checkpoints
as they are made (`checkpoints/iter_<n>/`, `checkpoints/best_<return>_<iter>/`), one line per
evaluation appended to `rewards.jsonl`, and at the end summary.json, provenance.json and
records/. If the Trainer (the learner's node) is lost, a new Trainer resumes from the last
checkpoint, read back from the storage without unpickling anything.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import RayActorError

from vocab.spot import SPOT_RESOURCE
from workloads.common.actors import start_actor
from workloads.common.provenance import package_version, provenance
from workloads.common.results import ResultsWriter
from workloads.common.spot_market.billing import Meter
from workloads.common.storage import LocalStorage, Storage, open_storage
from workloads.rl.algorithm import RemoteTrainer, trainer_options
from workloads.rl.checkpoint import (
    best_name,
    iteration_name,
    pack_state,
    read_checkpoint,
    write_checkpoint,
)
from workloads.rl.options import RlOptions

REWARDS_FILE = "rewards.jsonl"
START_ATTEMPTS = 3


def runners_replaced(placements: list[list[str]], lost_nodes: set[str]) -> int:
    """How many env runners came back on another node after their node was lost, from the
    runners' nodes at each change (a list per change, one node per healthy runner). Ray
    restarts such a runner itself, often between two of RLlib's health probes, so RLlib's
    own restart count can miss it; the move to another node does not."""
    replaced = 0
    for before, after in itertools.pairwise(placements):
        left = list(after)
        for node in before:
            if node in left:
                left.remove(node)
            elif node in lost_nodes:
                replaced += 1
    return replaced


def append_line(storage: Storage, name: str, row: dict[str, Any]) -> None:
    """One JSON line added to `name`: appended in place in a folder; S3 has no append, so
    there the object is put again with the earlier lines unchanged and this one added."""
    line = (json.dumps(row, sort_keys=True) + "\n").encode()
    if isinstance(storage, LocalStorage):
        path = storage.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as out:
            out.write(line)
        return
    earlier = storage.read_bytes(name) if name in storage.names() else b""
    storage.write_bytes(name, earlier + line)


class Nodes:
    """The cluster's nodes as Ray lists them, polled once an iteration: a spot node (one
    offering the spot placement resource) seen alive and later dead was preempted (or lost);
    every interval between polls is charged to the one billing meter at the counts of the
    poll that starts it (alive spot nodes at the spot price, all other alive nodes — head,
    learner, on-demand — at the on-demand price), and to a second meter as if every node were
    on-demand."""

    def __init__(self, on_demand_price: float, spot_price: float) -> None:
        self.alive: set[str] = set()
        self.lost: list[str] = []
        self.spot_price = spot_price
        self.meter = Meter(on_demand_price)
        self.all_on_demand = Meter(on_demand_price)
        self.counts = (0, 0)  # (other nodes, spot nodes) alive at the last poll

    def poll(self, now: float) -> list[str]:
        """Spot nodes lost since the last poll; bills up to `now` (epoch seconds)."""
        if self.meter.billed_to == 0.0:
            self.meter.billed_to = self.all_on_demand.billed_to = now
        others, spot = self.counts
        self.meter.charge_until(now, on_demand=others, spot=spot, spot_up=spot,
                                spot_price=self.spot_price)
        self.all_on_demand.charge_until(now, on_demand=others + spot, spot=0, spot_up=0,
                                        spot_price=0.0)
        lost = []
        others = spot = 0
        for node in ray.nodes():
            is_spot = bool(node.get("Resources", {}).get(SPOT_RESOURCE))
            if node["Alive"]:
                spot += is_spot
                others += not is_spot
            if not is_spot and node["NodeID"] not in self.alive:
                continue
            if node["Alive"]:
                self.alive.add(node["NodeID"])
            elif node["NodeID"] in self.alive:
                self.alive.discard(node["NodeID"])
                lost.append(node["NodeID"])
        self.counts = (others, spot)
        self.lost += lost
        return lost


@dataclass
class Progress:
    """What the run has done so far, across Trainers (a resumed one counts from its
    checkpoint)."""

    iteration: int = 0
    env_steps: int = 0
    episodes: int = 0
    best_return: float | None = None
    last_return: float | None = None
    runner_restarts: int = 0
    learner_resumes: int = 0
    samples_lost: int = 0
    checkpoint: str | None = None  # the latest iteration checkpoint
    checkpoints: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)  # files written while running


class RlRun:
    def __init__(self, options: RlOptions, say: Callable[[str], None]) -> None:
        self.options = options
        self.say = say
        self.writer = ResultsWriter("rl", options.out, options.s3_endpoint)
        self.storage = open_storage(self.writer.location, options.s3_endpoint)
        self.progress = Progress()
        self.nodes = Nodes(options.on_demand_price, options.spot_price)
        self.iterations: list[dict[str, Any]] = []
        self.preemptions: list[dict[str, Any]] = []
        self.started = time.time()
        self.runner_nodes: list[str] = []
        self.runner_placements: list[list[str]] = []
        # a Trainer's own counters start at 0: these are where the current one started
        self.base = {"iteration": 0, "env_steps": 0, "episodes": 0, "runner_restarts": 0}

    def start_trainer(self, state: bytes | None = None) -> Any:
        placed = trainer_options(self.options)
        for attempt in range(1, START_ATTEMPTS + 1):
            self.say(f"starting the learner (Trainer): 1 CPU, {placed['num_gpus']:g} GPU, "
                     f"resources {placed['resources'] or 'none'} (it waits for such a node)")
            trainer = start_actor(RemoteTrainer, self.options, state, options=placed)
            try:
                node = str(ray.get(trainer.node_id.remote()))
                break
            except RayActorError as error:
                # RLlib cannot build an Algorithm while none of its env runners is up (their
                # spot nodes preempted as they start): try again, on the nodes there are now
                if attempt == START_ATTEMPTS:
                    raise
                self.say(f"the learner did not start ({type(error).__name__}: "
                         f"{str(error).splitlines()[-1][:200]}); attempt {attempt + 1} of "
                         f"{START_ATTEMPTS}")
        self.say(f"learner (Trainer) on node {node[:12]}; {self.options.env_runners} env "
                 f"runners on {self.options.runner_on} nodes")
        return trainer

    def run(self) -> Storage:
        options = self.options
        self.say(f"SAC on {options.env}: {options.steps} env steps, "
                 f"{options.env_runners} env runners, seed {options.seed}")
        self.nodes.poll(time.time())
        trainer = self.start_trainer()
        try:
            while self.progress.env_steps < options.steps:
                try:
                    row = ray.get(trainer.iterate.remote())
                    self.record(row)
                    self.after_iteration(trainer, row)
                except RayActorError as error:  # the learner's node is gone
                    trainer = self.resume(error)
            try:
                self.evaluated(trainer, ray.get(trainer.final_evaluation.remote()),
                               self.meta(), final=True)
            except RayActorError as error:  # lost at the very end: no final evaluation
                self.say(f"no final evaluation: the learner was lost ({error})")
        finally:
            try:
                ray.get(trainer.stop.remote(), timeout=60)
            except Exception:  # a lost Trainer has nothing left to stop  # noqa: BLE001
                pass
            ray.kill(trainer)
        return self.finish()

    def resume(self, error: RayActorError) -> Any:
        """The learner's node was lost: a new Trainer from the last checkpoint."""
        progress = self.progress
        if progress.checkpoint is None:
            raise RuntimeError(f"the learner was lost before its first checkpoint: {error}")
        checkpoint = read_checkpoint(self.storage, progress.checkpoint)
        meta = checkpoint.meta
        progress.learner_resumes += 1
        progress.samples_lost += progress.env_steps - int(meta["env_steps"])
        self.say(f"learner lost ({type(error).__name__}); resuming from "
                 f"{progress.checkpoint} ({progress.env_steps - int(meta['env_steps'])} "
                 f"env steps lost)")
        self.base = {"iteration": int(meta["iteration"]), "env_steps": int(meta["env_steps"]),
                     "episodes": int(meta["episodes"]),
                     "runner_restarts": progress.runner_restarts}
        progress.iteration = self.base["iteration"]
        progress.env_steps = self.base["env_steps"]
        return self.start_trainer(pack_state(checkpoint.state))

    def record(self, row: dict[str, Any]) -> None:
        progress = self.progress
        progress.iteration = self.base["iteration"] + row["iteration"]
        progress.env_steps = self.base["env_steps"] + row["env_steps"]
        progress.episodes = self.base["episodes"] + row["episodes"]
        progress.runner_restarts = self.base["runner_restarts"] + row["runner_restarts"]
        now = time.time() - self.started
        for node in self.nodes.poll(time.time()):
            self.preemptions.append({"t": now, "iteration": progress.iteration,
                                     "env_steps": progress.env_steps,
                                     "cost": self.nodes.meter.cost, "node_id": node})
            self.say(f"spot node {node[:12]} lost; training goes on with "
                     f"{row['healthy_runners']}/{row['runners']} env runners")
        self.iterations.append({
            **row, "t": now, "iteration": progress.iteration, "env_steps": progress.env_steps,
            "episodes": progress.episodes, "runner_restarts": progress.runner_restarts,
            "learner_resumes": progress.learner_resumes, "cost": self.nodes.meter.cost,
        })
        if row["runner_nodes"] != self.runner_nodes:
            self.runner_nodes = row["runner_nodes"]
            self.runner_placements.append(self.runner_nodes)
            self.say(f"env runners on nodes: {', '.join(self.runner_nodes) or 'none'}")
        evaluated = row["eval_return"] is not None and row["eval_episodes"] > 0
        self.say(
            f"iteration {progress.iteration}: {progress.env_steps}/{self.options.steps} env "
            f"steps, train return {_text(row['train_return'])}"
            + (f", evaluation {row['eval_return']:.1f}" if evaluated else "")
            + f", env runners {row['healthy_runners']}/{row['runners']}, restarts "
            f"{progress.runner_restarts}"
        )

    def after_iteration(self, trainer: Any, row: dict[str, Any]) -> None:
        progress = self.progress
        meta = self.meta()
        self.evaluated(trainer, row["evaluations"], meta)
        if progress.iteration % self.options.checkpoint_every == 0:
            name = iteration_name(progress.iteration)
            self.save(trainer, name, meta)
            progress.checkpoint = name

    def evaluated(self, trainer: Any, evaluations: list[dict[str, Any]],
                  meta: dict[str, Any], final: bool = False) -> None:
        """Evaluations into rewards.jsonl (appended); the learner checkpointed as the best
        policy when one beats the best so far."""
        progress = self.progress
        best_here = None
        for evaluation in evaluations:
            progress.last_return = evaluation["return"]
            if progress.best_return is None or evaluation["return"] > progress.best_return:
                progress.best_return = best_here = evaluation["return"]
            append_line(self.storage, REWARDS_FILE, {
                "iteration": progress.iteration, "env_steps": progress.env_steps,
                "t": time.time() - self.started, "return": evaluation["return"],
                "returns": evaluation["returns"], "runner": evaluation["runner"],
                "runner_episode": evaluation["runner_episode"], "best": progress.best_return,
                "final": final,
            })
        if final and evaluations:
            progress.last_return = sum(e["return"] for e in evaluations) / len(evaluations)
            self.say(f"final evaluation: {progress.last_return:.1f} (mean of "
                     f"{len(evaluations)} env runners)")
        if best_here is not None:
            self.save(trainer, best_name(best_here, progress.iteration),
                      {**meta, "eval_return": best_here})

    def meta(self) -> dict[str, Any]:
        progress = self.progress
        return {"iteration": progress.iteration, "env_steps": progress.env_steps,
                "episodes": progress.episodes, "env": self.options.env,
                "options": self.options.parameters()}

    def save(self, trainer: Any, name: str, meta: dict[str, Any]) -> None:
        state: bytes = ray.get(trainer.state.remote())
        self.progress.written += write_checkpoint(self.storage, name, state, meta)
        self.progress.checkpoints.append(name)
        self.say(f"checkpoint {name}")

    def finish(self) -> Storage:
        options, progress = self.options, self.progress
        self.writer.add_records("iterations", self.iterations)
        self.writer.add_records("preemptions", self.preemptions)
        if options.results_to_log:  # no bucket: what was written comes back in the log too
            present = set(self.storage.names())
            for name in [*progress.written, REWARDS_FILE]:
                if name in present:
                    self.writer.add_file(name, self.storage.read_bytes(name))
        wall = time.time() - self.started
        summary = {
            "target": options.target,
            "env": options.env,
            "env_steps": progress.env_steps,
            "iterations": progress.iteration,
            "episodes": progress.episodes,
            "wall_time_s": wall,
            "env_steps_per_s": progress.env_steps / wall if wall > 0 else None,
            "best_eval_return": progress.best_return,
            "last_eval_return": progress.last_return,
            "env_runners": options.env_runners,
            "preemptions": len(self.preemptions),
            "env_runner_restarts": progress.runner_restarts,
            "env_runners_replaced": runners_replaced(self.runner_placements,
                                                     set(self.nodes.lost)),
            "learner_resumes": progress.learner_resumes,
            "samples_lost": progress.samples_lost,
            "checkpoints": sorted(set(progress.checkpoints)),
            "cost": self.nodes.meter.cost,
            "all_on_demand_cost": self.nodes.all_on_demand.cost,
            "on_demand_price": options.on_demand_price,
            "spot_price": options.spot_price,
            "on_demand_node_s": self.nodes.meter.on_demand_s,
            "spot_node_s": self.nodes.meter.spot_up_s,
            "seed": options.seed,
        }
        document = provenance(options.parameters(), {}, options.target, {"seed": options.seed})
        document["torch"] = package_version("torch")
        document["gymnasium"] = package_version("gymnasium")
        storage = self.writer.finish(summary, document, to_log=options.results_to_log)
        self.say(f"results: {storage.uri}")
        return storage


def _text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def run_experiment(options: RlOptions, say: Callable[[str], None] = print) -> Storage:
    return RlRun(options, say).run()
