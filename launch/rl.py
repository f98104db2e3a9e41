"""`invoke run-rl`: the RL workload's command line, made from its option spec and handed to
the one target path (a new spot lab by default, --address, --stack), and its figures drawn
here from the records that came back.

On the local lab the run's own schedule preempts env runners (`--preempt-every`, and
`--lose-learner-at` for the learner's node): `LabFaults` follows the run's output lines and
asks the lab to interrupt the node a runner (or the learner) is on, as AWS FIS's
send-spot-instance-interruptions would; what it did is kept in `spotlab/faults.json`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from launch.options import RL_LAB_SPEC, RequirementsOptions, RlLabOptions, TargetOptions
from launch.requirements import user_requirements
from launch.targets import LAB_RECORD, run_workload
from launch.workload import workload_run
from spotlab.config import SpotLabConfig
from spotlab.lab import SpotLab, running_lab
from spotlab.options import SpotLabOptions
from workloads.common.options import OptionError
from workloads.common.storage import LocalStorage
from workloads.rl.envs import check_env, check_env_file, env_file
from workloads.rl.figures import draw
from workloads.rl.options import RL_SPEC, RlOptions

FAULTS_FILE = f"{LAB_RECORD}/faults.json"
RUNNERS_LINE = "env runners on nodes:"
LEARNER_LINE = "learner (Trainer) on node "
ITERATION_LINE = re.compile(r"^iteration (\d+): (\d+)/(\d+) env steps")
RUNNER_HEALTH = re.compile(r"env runners (\d+)/(\d+)")
LAB_UP_LINE = re.compile(r"spot lab (\w+) is up: Ray at ")


def local_gpus() -> int:
    """NVIDIA GPUs this machine offers (their device files, as Ray's detection finds them)."""
    return len([p for p in Path("/dev").glob("nvidia[0-9]*") if p.name[6:].isdigit()])


def rl_lab(options: RlOptions, lab: SpotLabOptions) -> SpotLabConfig:
    """The lab of a local run: as the lab flags say, with a learner node when the learner is
    to be placed on one and none was asked for."""
    config = replace(lab.config(), on_demand_price=options.on_demand_price)
    if options.learner_on == "learner" and config.learner == 0:
        config = replace(config, learner=1)
    return config


class LabFaults:
    """Faults injected into a run on a spot lab as its output lines come: after every
    `preempt_every`-th iteration but the run's last, the spot node of an env runner is
    preempted (a notice, a drain, a kill, a replacement; each time the runner on the lowest
    node id among those not yet preempted); after iteration `lose_learner_at` — once every
    env runner is in service again, so one fault is recovered from before the next — the
    learner's node is lost (killed without notice, not replaced). The lab is the one handed
    in, or the one whose "is up" line the output shows."""

    def __init__(self, preempt_every: int, lose_learner_at: int | None,
                 lab: SpotLab | None = None) -> None:
        self.preempt_every = preempt_every
        self.lose_learner_at = lose_learner_at
        self.lab = lab
        self.runner_nodes: list[str] = []
        self.learner = ""
        self.preempted: set[str] = set()  # Ray node ids
        self.seen: set[int] = set()
        self.injected: list[dict[str, Any]] = []

    def feed(self, line: str) -> None:
        text = line.strip()
        if self.lab is None:
            up = LAB_UP_LINE.search(text)
            if up is not None:
                self.lab = running_lab(up.group(1))
            return
        if text.startswith(RUNNERS_LINE):
            listed = text.split(":", 1)[1].strip()
            self.runner_nodes = [n for n in listed.split(", ") if n and n != "none"]
        elif text.startswith(LEARNER_LINE):
            self.learner = text.removeprefix(LEARNER_LINE).split(";")[0].strip()
        iteration = ITERATION_LINE.match(text)
        if iteration is None:
            return
        number = int(iteration.group(1))
        if number in self.seen:  # again after a learner resume: no second fault
            return
        self.seen.add(number)
        if int(iteration.group(2)) >= int(iteration.group(3)):  # the last: the run ends
            return
        if self.preempt_every and number % self.preempt_every == 0:
            candidates = [n for n in self.runner_nodes if n not in self.preempted]
            if candidates:
                self._interrupt("preempt", number, candidates[0])
        lost = any(fault["kind"] == "lose-learner" for fault in self.injected)
        if (self.lose_learner_at is not None and number >= self.lose_learner_at and not lost
                and self.learner and self._runners_in_service(text)):
            self._interrupt("lose-learner", number, self.learner)

    def _runners_in_service(self, line: str) -> bool:
        """The iteration line shows every env runner in service, none on a preempted node."""
        health = RUNNER_HEALTH.search(line)
        if health is None:
            return True
        healthy, total = int(health.group(1)), int(health.group(2))
        return healthy == total and not self.preempted & set(self.runner_nodes)

    def _interrupt(self, kind: str, iteration: int, ray_node: str) -> None:
        assert self.lab is not None
        name = lab_node(self.lab, ray_node)
        if name is None:
            return
        self.lab.interrupt(name)
        if kind == "preempt":
            self.preempted.add(ray_node)
        self.injected.append({"kind": kind, "after_iteration": iteration, "node": name,
                              "ray_node_id": ray_node, "t": time.time()})

    def record(self) -> dict[str, Any]:
        return {"preempt_every": self.preempt_every, "lose_learner_at": self.lose_learner_at,
                "injected": self.injected}


def lab_node(lab: SpotLab, ray_node_id: str) -> str | None:
    """The lab's name of the node whose Ray id is (or starts with) `ray_node_id`."""
    for event in lab.events():
        if event["event"] == "join" and str(event["ray_node_id"]).startswith(ray_node_id):
            return str(event["node"])
    return None


def run_rl(
    options: RlOptions,
    target: TargetOptions | None = None,
    lab: SpotLabOptions | None = None,
    show: Callable[[str], None] = print,
    requirements: RequirementsOptions | None = None,
) -> Path:
    """Check the environment here (before any lab starts), run the workload on the target,
    then draw its figures; returns the local results folder. `requirements`: what the
    user's environment needs, installed with the job on a cluster (checked here on the
    lab)."""
    target = target or TargetOptions()
    lab = lab or RL_LAB_SPEC.default()  # the task's lab defaults, also when called
    local = not (target.address or target.stack)
    if local and isinstance(lab, RlLabOptions) and lab.learner == 0 \
            and options.learner_on == "learner":
        raise OptionError("--learner", "0 leaves the learner no node to run on (--learner-on "
                          "learner); give 1 or more, or another --learner-on")
    if local and options.learner_gpus > local_gpus():
        raise OptionError("--learner-gpus", f"this machine has {local_gpus()} GPUs, asked "
                          f"{options.learner_gpus:g} (a GPU is asked only where one exists: "
                          f"--address or --stack)")
    needs = user_requirements(requirements.requirements if requirements else None, local)
    if local:  # the lab runs this environment: the env is made here once
        check_env(options.env)
    else:  # a cluster installs --requirements: the file is read, not run, here
        check_env_file(options.env)
    path, _ = env_file(options.env)
    if path is not None:  # the file travels with the job, to every env runner and learner
        options = replace(options, env_file=path)
    run = workload_run("rl", "workloads.rl", RL_SPEC, options, needs)
    # on a stack only its --preemptions schedule counts (carried out through AWS FIS)
    config = rl_lab(options, lab) if local else lab.config()
    faults = None
    if local and isinstance(lab, RlLabOptions):
        faults = LabFaults(lab.preempt_every, lab.lose_learner_at)

    def follow(line: str) -> None:
        show(line)
        if faults is not None:
            faults.feed(line)

    folder = run_workload(run, target.address, target.stack, target.out, follow, lab=config,
                          stall_timeout_s=target.stall_timeout)
    if faults is not None:
        LocalStorage(folder).write_bytes(
            FAULTS_FILE, (json.dumps(faults.record(), indent=2) + "\n").encode())
    draw(folder)
    return folder
