"""RL benchmark: SAC on Pendulum-v1 on a local spot lab, the same seed with and without spot
preemptions, side by side; and env-runner scaling (env steps per second with 1, 2, 4 runners).

Each run is `python -m workloads.rl` driving the lab (a learner node and spot nodes), as
`invoke run-rl` does; "with preemptions" interrupts the spot node of an env runner every
`--interrupt-every` iterations (a notice, a drain, a kill, a replacement node). Prints, per
run: env steps, wall time, env steps/s, best and last evaluation return, the first env step at
which an evaluation reached the target (-300; a random policy scores about -1200),
preemptions, env-runner restarts.

    python -m benchmarks.rl_scaling [--steps 6000] [--runners 2] [--scaling 1,2,4]
        [--scaling-steps 1500] [--eval-every 4] [--seed 0] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import procs
from spotlab import SpotLab, SpotLabConfig, spot_lab
from workloads.common.results import read_json, read_records
from workloads.common.storage import LocalStorage

REPO = Path(__file__).resolve().parents[1]
TARGET_RETURN = -300.0
RUNNERS_LINE = "env runners on nodes:"
LEARNER_LINE = "learner (Trainer) on node "
RUNNER_HEALTH = re.compile(r"env runners (\d+)/(\d+), restarts (\d+)")


def lab_config(spot: int) -> SpotLabConfig:
    """A learner node and `spot` 1-CPU spot nodes; no preemption but the driver's own."""
    return SpotLabConfig(spot=spot, on_demand=0, learner=1, cpus_per_node=1, alpha=1.0,
                         warning_s=2.0, replace_delay_s=1.0, dashboard=False)


class Faults:
    """Faults injected into a running RL workload as its output lines come: after each
    iteration n with `interrupt_at(n)`, the spot node of the first env runner is preempted (a
    notice, a drain, a kill, a replacement); after each n with `lose_learner_at(n)`, the
    learner's node is lost (killed without notice, not replaced) — once every env runner is
    back and restarted after the preemptions before it, so one fault is recovered from before
    the next (a new learner builds new env runners, which would hide a pending restart)."""

    def __init__(self, lab: SpotLab, interrupt_at: Callable[[int], bool],
                 lose_learner_at: Callable[[int], bool]) -> None:
        self.lab = lab
        self.interrupt_at = interrupt_at
        self.lose_learner_at = lose_learner_at
        self.runners: list[str] = []
        self.first_runners: list[str] = []
        self.learner = ""
        self.interrupted: list[str] = []
        self.interrupted_ray_nodes: set[str] = set()
        self.lost_learners: list[str] = []
        self.seen: set[int] = set()
        self.learner_loss_due = False

    def feed(self, line: str) -> None:
        if line.startswith(RUNNERS_LINE):
            self.runners = [n for n in line.split(":", 1)[1].strip().split(", ") if n != "none"]
            self.first_runners = self.first_runners or self.runners
        if line.startswith(LEARNER_LINE):
            self.learner = line.removeprefix(LEARNER_LINE).split(";")[0].strip()
        if not line.startswith("iteration "):
            return
        iteration = int(line.split()[1].rstrip(":"))
        if iteration in self.seen:  # again after a learner resume: no second fault
            return
        self.seen.add(iteration)
        if self.runners and self.interrupt_at(iteration):
            name = lab_node(self.lab, self.runners[0])
            if name:
                self.interrupted.append(name)
                self.interrupted_ray_nodes.add(self.runners[0])
                self.lab.interrupt(name)
        self.learner_loss_due = self.learner_loss_due or self.lose_learner_at(iteration)
        if self.learner and self.learner_loss_due and self._recovered(line):
            self.learner_loss_due = False
            name = lab_node(self.lab, self.learner)
            if name and name not in self.lost_learners:
                self.lost_learners.append(name)
                self.lab.interrupt(name)


    def _recovered(self, line: str) -> bool:
        """The iteration line shows every env runner healthy, and none is on a node that was
        preempted (each came back elsewhere: Ray may restart a runner between two of RLlib's
        health probes, so the line's restart count is no evidence)."""
        health = RUNNER_HEALTH.search(line)
        if health is None:
            return True
        healthy, total, _ = (int(group) for group in health.groups())
        return healthy == total and not self.interrupted_ray_nodes & set(self.runners)


def drive(lab: SpotLab, args: list[str], out: Path, interrupt_at: Callable[[int], bool],
          show: Callable[[str], None] = lambda line: None, timeout_s: float = 7200.0,
          lose_learner_at: Callable[[int], bool] = lambda n: False) -> dict[str, Any]:
    """Run the workload on `lab` (a driver process with the lab's environment) with `Faults`.
    Returns the exit code, the output lines, the nodes interrupted, the learner nodes lost
    and the runners first seen."""
    faults = Faults(lab, interrupt_at, lose_learner_at)

    def on_line(line: str) -> None:
        show(line)
        faults.feed(line)

    code, lines = procs.follow([sys.executable, "-m", "workloads.rl", *args, "--out", str(out)],
                               on_line, timeout_s=timeout_s, name="the RL run",
                               env=lab.driver_env, cwd=REPO)
    return {"returncode": code, "lines": lines,
            "interrupted": faults.interrupted, "lost_learners": faults.lost_learners,
            "first_runners": faults.first_runners}


def follow(log: Path, interrupt_at: set[int], lose_learner_at: set[int]) -> None:
    """Faults for a run started elsewhere (`invoke run-rl ... | tee LOG`): wait for its lab
    to come up, then follow the log until the run's results line."""
    from spotlab.lab import running_lab

    faults: Faults | None = None
    position = 0
    while True:
        text = log.read_text(errors="replace") if log.exists() else ""
        lines, position = text[position:].splitlines(keepends=True), position
        for line in lines:
            if not line.endswith("\n"):
                break
            position += len(line)
            line = line.strip()
            if line.startswith("rc="):  # the run ended (its exit code, appended by the caller)
                return
            if faults is None and "is up: Ray at" in line:
                lab_id = line.split("spot lab ", 1)[1].split(" ", 1)[0].rstrip(":")
                faults = Faults(running_lab(lab_id), interrupt_at.__contains__,
                                lose_learner_at.__contains__)
                print(f"following lab {lab_id}", flush=True)
            elif faults is not None:
                faults.feed(line)
                if line.startswith("results: "):
                    print(f"preempted {faults.interrupted}, learners lost "
                          f"{faults.lost_learners}", flush=True)
                    return
        time.sleep(0.5)


def lab_node(lab: SpotLab, ray_node_id: str) -> str | None:
    """The lab's name of the node whose Ray id is (or starts with) `ray_node_id`."""
    for event in lab.events():
        if event["event"] == "join" and str(event["ray_node_id"]).startswith(ray_node_id):
            return str(event["node"])
    return None


def outcome(out: Path) -> dict[str, Any]:
    storage = LocalStorage(out)
    summary = read_json(storage, "summary.json")
    rows = read_records(storage, "iterations")
    reached = [row["env_steps"] for row in rows
               if row["eval_episodes"] > 0 and row["eval_return"] >= TARGET_RETURN]
    curve = [(row["env_steps"], evaluation["return"]) for row in rows
             for evaluation in row["evaluations"]]
    return {**summary, "target_reached_at": reached[0] if reached else None, "curve": curve}


def curves_side_by_side(runs: list[dict[str, Any]], every: int) -> str:
    """Mean evaluation return per `every` env steps, one column per run."""
    width = max(22, *(len(run["label"]) + 2 for run in runs))
    header = f"{'env steps':>11}" + "".join(f"{run['label']:>{width}}" for run in runs)
    lines = [header, "-" * len(header)]
    last = max((steps for run in runs for steps, _ in run["curve"]), default=0)
    for start in range(0, last + 1, every):
        cells = []
        for run in runs:
            values = [value for steps, value in run["curve"] if start < steps <= start + every]
            cells.append(f"{sum(values) / len(values):>{width}.1f}" if values else
                         f"{'-':>{width}}")
        lines.append(f"{start + every:>11}" + "".join(cells))
    return "\n".join(lines)


def one_run(label: str, spot: int, args: list[str], interrupt_every: int | None,
            folder: Path) -> dict[str, Any]:
    print(f"[{label}] lab: learner + {spot} spot nodes; workload {' '.join(args)}", flush=True)
    with spot_lab(lab_config(spot), progress=lambda line: None) as lab:
        driven = drive(lab, args, folder / label,
                       (lambda n: n % interrupt_every == 0) if interrupt_every else
                       (lambda n: False),
                       show=lambda line: print(f"  [{label}] {line}", flush=True)
                       if line.startswith(("iteration", "checkpoint", "spot node")) else None)
    if driven["returncode"] != 0:
        raise RuntimeError(f"{label}: the workload failed:\n" + "\n".join(driven["lines"][-20:]))
    return {"label": label, **outcome(folder / label)}


def _number(row: dict[str, Any], key: str, form: str) -> str:
    return "-" if row.get(key) is None else format(row[key], form)


def table(rows: list[dict[str, Any]]) -> str:
    header = (f"{'run':<22} {'steps':>6} {'wall s':>7} {'steps/s':>7} {'best':>8} {'last':>8} "
              f"{'≥-300 at':>8} {'preempt':>7} {'replaced':>8}")
    lines = [header, "-" * len(header)]
    for row in rows:
        lines.append(
            f"{row['label']:<22} {row['env_steps']:>6} {row['wall_time_s']:>7.0f} "
            f"{row['env_steps_per_s']:>7.1f} {_number(row, 'best_eval_return', '.1f'):>8} "
            f"{_number(row, 'last_eval_return', '.1f'):>8} "
            f"{_number(row, 'target_reached_at', 'd'):>8} "
            f"{row['preemptions']:>7} {row.get('env_runners_replaced', '-'):>8}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rl_scaling",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6000, help="env steps of the learning runs")
    parser.add_argument("--runners", type=int, default=2, help="env runners of the learning runs")
    parser.add_argument("--interrupt-every", type=int, default=8,
                        help="iterations between preemptions in the preempted run")
    parser.add_argument("--eval-every", type=int, default=4,
                        help="episodes per env runner between evaluations in the learning runs")
    parser.add_argument("--scaling", default="1,2,4", help="env runner counts to time ('' skips)")
    parser.add_argument("--scaling-steps", type=int, default=1500)
    parser.add_argument("--curve-every", type=int, default=1000,
                        help="env steps per line of the return curves")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write every row to this file")
    parser.add_argument("--follow", type=Path, metavar="LOG",
                        help="instead: inject faults into the run whose output goes to LOG "
                        "(`invoke run-rl ... | tee LOG`), after the iterations given below")
    parser.add_argument("--preempt-at", default="", help="with --follow: iterations, e.g. 6,14")
    parser.add_argument("--lose-learner-at", default="", help="with --follow: iterations")
    args = parser.parse_args(argv)
    if args.follow:
        follow(args.follow, _iterations(args.preempt_at), _iterations(args.lose_learner_at))
        return 0
    common = ["--seed", str(args.seed)]  # the workload's defaults otherwise, as run-rl
    rows = []
    with tempfile.TemporaryDirectory(prefix="rl-bench-") as temp:
        folder = Path(temp)
        learning = [*common, "--steps", str(args.steps), "--env-runners", str(args.runners),
                    "--eval-every", str(args.eval_every)]
        rows.append(one_run("no preemptions", args.runners, learning, None, folder))
        rows.append(one_run(f"preempt every {args.interrupt_every} it", args.runners + 1,
                            learning, args.interrupt_every, folder))
        for runners in [int(n) for n in args.scaling.split(",") if n.strip()]:
            scaling = [*common, "--steps", str(args.scaling_steps), "--env-runners",
                       str(runners), "--eval-every", "1000", "--checkpoint-every", "1000"]
            rows.append(one_run(f"{runners} env runners", runners, scaling, None, folder))
    print(f"\nSAC on Pendulum-v1, seed {args.seed} (target: evaluation return ≥ "
          f"{TARGET_RETURN:g})")
    print(table(rows))
    print(f"\nMean evaluation return per {args.curve_every} env steps, same seed:")
    print(curves_side_by_side(rows[:2], args.curve_every))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


def _iterations(text: str) -> set[int]:
    return {int(n) for n in text.split(",") if n.strip()}


if __name__ == "__main__":
    sys.exit(main())
