"""Elastic training under preemption: checkpoint on the spot notice vs periodic checkpoints
only, side by side.

The same training (the shipped digits CNN) twice on one spot lab, under the same seeded
preemption schedule (spot nodes interrupted when training reaches the same steps): once as
spotburst runs it (a notice makes every rank checkpoint at the current step and hold until
Ray Train restarts it on the nodes left), once as restart-based tools do (the notice is
ignored; Ray Train restarts from the last periodic checkpoint). Both checkpoint every
--checkpoint-every steps as well. Prints the steps lost at each preemption in both modes side
by side, then per mode: preemptions, lost steps (steps computed twice), mean time from the
notice to the first step after the restart, wall time, accuracy; then the wall-time ratio.

    python -m benchmarks.elastic_preemption [--preemptions 3] [--steps 300] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

import procs
from spotlab import SpotLab, SpotLabConfig, spot_lab

REPO = Path(__file__).resolve().parents[1]
PROGRESS = re.compile(r"elastic: step (\d+)/\d+ on (\d+) workers")
MODES = ("checkpoint", "ignore")


def run_with_interrupts(lab: SpotLab, out: Path, workload_args: list[str],
                        interrupt_at: list[int], timeout_s: float = 600.0
                        ) -> tuple[int, list[str], list[int]]:
    """`python -m workloads.elastic` on the lab; each time training reaches the next step
    of `interrupt_at` (as its progress lines say), a spot node that hosts a worker is
    interrupted. Returns the exit code, the log and the steps it interrupted after."""
    pending, done = sorted(interrupt_at), []
    interrupted: set[str] = set()

    def on_line(line: str) -> None:
        progress = PROGRESS.search(line)
        if pending and progress and int(progress[1]) >= pending[0]:
            spot = [n["name"] for n in lab.nodes()
                    if n["slot"] is not None and n["name"] not in interrupted]
            if spot:
                lab.interrupt(spot[0])
                interrupted.add(spot[0])
                done.append(int(progress[1]))
            pending.pop(0)

    command = [sys.executable, "-m", "workloads.elastic", "--out", str(out), *workload_args]
    code, log = procs.follow(command, on_line, timeout_s=timeout_s, name="the elastic run",
                             env=lab.driver_env, cwd=REPO)
    return code, log, done


def schedule(preemptions: int, steps: int, seed: int) -> list[int]:
    """Steps at which to interrupt: spread over the middle of the run, seeded."""
    rng = np.random.default_rng(seed)
    edges = np.linspace(0.15 * steps, 0.8 * steps, preemptions + 1)
    return [int(rng.uniform(low, high)) for low, high in zip(edges[:-1], edges[1:],
                                                            strict=True)]


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    at = schedule(args.preemptions, args.steps, args.seed)
    print(f"interrupting at steps {at}", flush=True)
    config = SpotLabConfig(spot=args.preemptions + 1, on_demand=1, cpus_per_node=1, alpha=1.0,
                           warning_s=args.warning, replace_delay_s=3600.0,
                           object_store_mb=80, dashboard=False)
    rows = []
    with tempfile.TemporaryDirectory(prefix="elastic-bench-") as folder:
        for mode in args.modes:
            with spot_lab(config) as lab:
                out = Path(folder) / mode
                code, log, done = run_with_interrupts(lab, out, [
                    "-m", str(args.preemptions + 2), "--on-notice", mode,
                    "--checkpoint-every", str(args.checkpoint_every), "--notice-poll", "0.2",
                    "--cluster-rescale-timeout", "3600", "--seed", str(args.seed), "--",
                    "--steps", str(args.steps), "--step-time", str(args.step_time)], at)
                if code != 0:
                    tail = "\n".join(log[-40:])
                    raise SystemExit(f"{mode}: the run failed:\n{tail}")
                summary = json.loads((out / "summary.json").read_text())
            restarts = [r for r in summary["restarts"] if r["cause"] == "preemption"]
            resume = [r["time_to_resume_s"] for r in restarts if r["time_to_resume_s"]]
            rows.append({"mode": mode, "interrupted_after": done,
                         "preemptions": len(restarts),
                         "lost_steps": summary["lost_steps"],
                         "lost_per_preemption": [r["lost_steps"] for r in restarts],
                         "mean_time_to_resume_s": float(np.mean(resume)) if resume else None,
                         "wall_time_s": summary["wall_time_s"],
                         "test_accuracy": summary["final_metrics"].get("test_accuracy")})
            print(f"  {mode}: {rows[-1]}", flush=True)
    return rows


def table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [f"Elastic training under preemption: {args.steps} steps of {args.step_time:g} s, "
             f"{args.preemptions} preemptions, warning {args.warning:g} s, periodic "
             f"checkpoint every {args.checkpoint_every} steps"]
    by_mode = {row["mode"]: row for row in rows}
    lines.append(f"{'preemption':<11} " + " ".join(
        f"{'after step':>10} {'lost (' + mode + ')':>20}" for mode in by_mode))
    count = max((len(row["lost_per_preemption"]) for row in rows), default=0)
    for index in range(count):
        cells = []
        for row in rows:
            after = row["interrupted_after"]
            lost = row["lost_per_preemption"]
            cells.append(f"{after[index] if index < len(after) else '-':>10} "
                         f"{lost[index] if index < len(lost) else '-':>20}")
        lines.append(f"{index + 1:<11} " + " ".join(cells))
    lines.append(f"{'on notice':<11} {'preempt':>7} {'lost':>5} {'lost/preempt':>13} "
                 f"{'resume s':>9} {'wall s':>7} {'accuracy':>8}")
    for row in rows:
        per = row["lost_steps"] / row["preemptions"] if row["preemptions"] else float("nan")
        resume = row["mean_time_to_resume_s"]
        lines.append(f"{row['mode']:<11} {row['preemptions']:>7} {row['lost_steps']:>5} "
                     f"{per:>13.1f} {resume if resume is not None else float('nan'):>9.1f} "
                     f"{row['wall_time_s']:>7.1f} {row['test_accuracy'] or float('nan'):>8.3f}")
    for row in rows:
        if row["preemptions"] < len(row["interrupted_after"]):
            lines.append(f"note: {row['mode']}: {len(row['interrupted_after'])} nodes "
                         f"interrupted, {row['preemptions']} restarts after a preemption: compare "
                         f"lost steps per preemption, not totals or wall times")
    if set(by_mode) != set(MODES):
        return "\n".join(lines)
    ratio = by_mode["ignore"]["wall_time_s"] / by_mode["checkpoint"]["wall_time_s"]
    lines.append(f"wall time periodic-only / notice checkpoint: {ratio:.3f}; lost steps "
                 f"{by_mode['ignore']['lost_steps']} vs {by_mode['checkpoint']['lost_steps']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.elastic_preemption",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--preemptions", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    # At 0.05 s a step the periodic-only run restarted after only one of its three
    # interrupts (the run is short next to the 4 s warning and the 30-80 s restarts here).
    parser.add_argument("--step-time", type=float, default=0.3,
                        help="seconds per step (the script pads each step to this)")
    parser.add_argument("--checkpoint-every", type=int, default=50)
    parser.add_argument("--warning", type=float, default=4.0, help="lab seconds of notice")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modes", type=lambda text: text.split(","), default=list(MODES),
                        help="comma-separated: checkpoint,ignore (both: the comparison)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    rows = measure(args)
    print(table(rows, args))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
