"""RL benchmark: SAC on Pendulum-v1 on a local spot lab, the same seed with and without spot
preemptions, side by side; and env-runner scaling (env steps per second with 1, 2, 4 runners).

Each run is `python -m workloads.rl` driving the lab (a learner node and spot nodes), as
`invoke run-rl` does; "with preemptions" interrupts the spot node of an env runner every
`--interrupt-every` iterations (a notice, a drain, a kill, a replacement node). Prints, per
run: env steps, wall time, env steps/s, best and last evaluation return, the first env step at
which an evaluation reached the target (-300; a random policy scores about -1200),
preemptions, env-runner restarts.

    python -m benchmarks.rl_pendulum [--steps 6000] [--runners 2] [--scaling 1,2,4]
        [--scaling-steps 1000] [--seed 0] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
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


def lab_config(spot: int) -> SpotLabConfig:
    """A learner node and `spot` 1-CPU spot nodes; no preemption but the driver's own."""
    return SpotLabConfig(spot=spot, on_demand=0, learner=1, cpus_per_node=1, alpha=1.0,
                         warning_s=2.0, replace_delay_s=1.0, dashboard=False)


def drive(lab: SpotLab, args: list[str], out: Path, interrupt_at: Callable[[int], bool],
          show: Callable[[str], None] = lambda line: None,
          timeout_s: float = 7200.0) -> dict[str, Any]:
    """Run the workload on `lab` (a driver process with the lab's environment); after each
    iteration n with `interrupt_at(n)`, preempt the spot node of the first env runner.
    Returns the exit code, the output lines, the nodes interrupted and the runners first
    seen."""
    driver = subprocess.Popen(
        [sys.executable, "-m", "workloads.rl", *args, "--out", str(out)], cwd=REPO,
        env={**os.environ, **lab.driver_env}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    runners: list[str] = []
    first_runners: list[str] = []
    interrupted: list[str] = []
    deadline = time.monotonic() + timeout_s
    try:
        assert driver.stdout is not None
        for line in driver.stdout:
            line = line.rstrip()
            lines.append(line)
            show(line)
            if line.startswith(RUNNERS_LINE):
                runners = [n for n in line.split(":", 1)[1].strip().split(", ") if n != "none"]
                first_runners = first_runners or runners
            if line.startswith("iteration ") and runners:
                iteration = int(line.split()[1].rstrip(":"))
                if interrupt_at(iteration):
                    names = {e["ray_node_id"]: e["node"] for e in lab.events()
                             if e["event"] == "join"}
                    if runners[0] in names:
                        interrupted.append(names[runners[0]])
                        lab.interrupt(names[runners[0]])
            if time.monotonic() > deadline:
                raise TimeoutError(f"the run took more than {timeout_s:g} s")
        driver.wait(timeout=60)
    finally:
        procs.stop(driver)
    return {"returncode": driver.returncode, "lines": lines, "interrupted": interrupted,
            "first_runners": first_runners}


def outcome(out: Path) -> dict[str, Any]:
    storage = LocalStorage(out)
    summary = read_json(storage, "summary.json")
    reached = [row["env_steps"] for row in read_records(storage, "iterations")
               if row["eval_episodes"] > 0 and row["eval_return"] >= TARGET_RETURN]
    return {**summary, "target_reached_at": reached[0] if reached else None}


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
              f"{'≥-300 at':>8} {'preempt':>7} {'restarts':>8}")
    lines = [header, "-" * len(header)]
    for row in rows:
        lines.append(
            f"{row['label']:<22} {row['env_steps']:>6} {row['wall_time_s']:>7.0f} "
            f"{row['env_steps_per_s']:>7.1f} {_number(row, 'best_eval_return', '.1f'):>8} "
            f"{_number(row, 'last_eval_return', '.1f'):>8} "
            f"{_number(row, 'target_reached_at', 'd'):>8} "
            f"{row['preemptions']:>7} {row['env_runner_restarts']:>8}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rl_pendulum",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6000, help="env steps of the learning runs")
    parser.add_argument("--runners", type=int, default=2, help="env runners of the learning runs")
    parser.add_argument("--interrupt-every", type=int, default=8,
                        help="iterations between preemptions in the preempted run")
    parser.add_argument("--scaling", default="1,2,4", help="env runner counts to time ('' skips)")
    parser.add_argument("--scaling-steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write every row to this file")
    args = parser.parse_args(argv)
    common = ["--seed", str(args.seed), "--hidden", "64", "--batch-size", "128",
              "--learning-starts", "500", "--steps-per-iteration", "200",
              "--rollout-fragment", "50", "--eval-every", "5", "--checkpoint-every", "10"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="rl-bench-") as temp:
        folder = Path(temp)
        learning = [*common, "--steps", str(args.steps), "--env-runners", str(args.runners)]
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
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
