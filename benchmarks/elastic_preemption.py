"""Elastic training under preemption: checkpoint on the spot notice vs periodic checkpoints
only, side by side; and the default `invoke run-elastic` demo, timed.

The comparison: the same training (the shipped digits CNN) twice, each on a fresh spot lab,
under the same preemption schedule (`--preempt-at`: spot nodes interrupted when training
reaches the same steps, carried out by launch.elastic.LabInterrupter, the mechanism
`invoke run-elastic` uses): once as spotburst runs it (a notice makes every rank checkpoint
at the current step and hold until Ray Train restarts it on the nodes left), once as
restart-based tools do (the notice is ignored; Ray Train restarts from the last periodic
checkpoint). Both checkpoint every --checkpoint-every steps as well. Prints the steps lost
at each preemption in both modes side by side, then per mode: preemptions, lost steps
(steps computed twice), mean time from the notice to the first step after the restart, wall
time, accuracy; then the wall-time ratio.

The demo (`--demo`): `invoke run-elastic --out DIR`, the default run exactly as the docs
show it, with its wall time (lab, run, teardown, figure) and headline numbers.

Targets: with the notice checkpoint no step is lost and every notice is honoured; ignoring
notices loses steps; the demo sees at least 3 preemptions, loses no step, honours every
notice, reaches 0.95 test accuracy, and (on a quiet machine) takes at most 240 s. Exits 1
when one is missed. Writes the table, how it was made and the targets to --out (a markdown
file) and the rows to --json.

    python -m benchmarks.elastic_preemption [--demo] [--out FILE] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import procs
from benchmarks.report import Target, exit_code, header, machine, targets_text
from launch.elastic import LabInterrupter
from spotlab import SpotLabConfig, spot_lab

REPO = Path(__file__).resolve().parents[1]
MODES = ("checkpoint", "ignore")
DEMO_WALL_TARGET_S = 240.0


def schedule(preemptions: int, steps: int, seed: int) -> list[int]:
    """Steps at which to interrupt: spread over the middle of the run, seeded."""
    rng = np.random.default_rng(seed)
    edges = np.linspace(0.15 * steps, 0.8 * steps, preemptions + 1)
    return [int(rng.uniform(low, high)) for low, high in zip(edges[:-1], edges[1:],
                                                            strict=True)]


def run_mode(mode: str, at: list[int], args: argparse.Namespace, folder: Path
             ) -> dict[str, Any]:
    config = SpotLabConfig(spot=args.preemptions + 1, on_demand=1, cpus_per_node=1, alpha=1.0,
                           warning_s=args.warning, replace_delay_s=3600.0,
                           object_store_mb=80, dashboard=False)
    out = folder / mode
    with spot_lab(config) as lab:
        interrupter = LabInterrupter(lambda line: print(line, flush=True)
                                     if line.startswith("elastic:") else None)
        interrupter.attach(lab)
        command = [sys.executable, "-m", "workloads.elastic", "--out", str(out),
                   "-m", str(args.preemptions + 2), "--on-notice", mode,
                   "--checkpoint-every", str(args.checkpoint_every),
                   "--cluster-rescale-timeout", "3600",
                   "--preempt-at", ",".join(map(str, at)), "--",
                   "--steps", str(args.steps), "--step-time", str(args.step_time)]
        code, log = procs.follow(command, interrupter.show, timeout_s=args.timeout,
                                 name=f"the {mode} run", env=lab.driver_env, cwd=REPO)
    if code != 0:
        tail = "\n".join(log[-40:])
        raise SystemExit(f"{mode}: the run failed:\n{tail}")
    summary = json.loads((out / "summary.json").read_text())
    restarts = [r for r in summary["restarts"] if r["cause"] == "preemption"]
    resume = [r["time_to_resume_s"] for r in restarts if r["time_to_resume_s"]]
    return {"mode": mode,
            "interrupted_after": [p["steps_done"] for p in summary["preemption_schedule"]],
            "preemptions": summary["preemptions"], "lost_steps": summary["lost_steps"],
            "lost_per_preemption": [r["lost_steps"] for r in restarts],
            "notices": summary["notices"], "notices_honoured": summary["notices_honoured"],
            "mean_time_to_resume_s": float(np.mean(resume)) if resume else None,
            "wall_time_s": summary["wall_time_s"],
            "test_accuracy": summary["final_metrics"].get("test_accuracy")}


def run_demo(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """The default run as the docs show it, timed from the command's start to its end."""
    out = folder / "demo"
    invoke = str(Path(sys.executable).with_name("invoke"))
    began = time.monotonic()
    code, log = procs.follow([invoke, "run-elastic", "--out", str(out)],
                             lambda line: print(line, flush=True)
                             if line.startswith(("elastic:", "results")) else None,
                             timeout_s=args.timeout, name="invoke run-elastic", cwd=REPO)
    wall = time.monotonic() - began
    if code != 0:
        raise SystemExit("the demo failed:\n" + "\n".join(log[-40:]))
    summary = json.loads((out / "summary.json").read_text())
    return {"mode": "demo", "command_wall_time_s": wall, "run_wall_time_s":
            summary["wall_time_s"], "preemptions": summary["preemptions"],
            "lost_steps": summary["lost_steps"], "notices": summary["notices"],
            "notices_honoured": summary["notices_honoured"],
            "notices_during_startup": summary["notices_during_startup"],
            "worker_counts": [w["workers"] for w in summary["worker_counts"]],
            "test_accuracy": summary["final_metrics"].get("test_accuracy")}


def table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    compared = [row for row in rows if row["mode"] in MODES]
    lines = []
    if compared:
        lines += [f"Elastic training under preemption: {args.steps} steps of "
                  f"{args.step_time:g} s on one worker, {args.preemptions} preemptions, "
                  f"warning {args.warning:g} s, periodic checkpoint every "
                  f"{args.checkpoint_every} steps", "", "```"]
        lines.append(f"{'preemption':<11} " + " ".join(
            f"{'after step':>10} {'lost (' + row['mode'] + ')':>20}" for row in compared))
        count = max((len(row["lost_per_preemption"]) for row in compared), default=0)
        for index in range(count):
            cells = []
            for row in compared:
                after, lost = row["interrupted_after"], row["lost_per_preemption"]
                cells.append(f"{after[index] if index < len(after) else '-':>10} "
                             f"{lost[index] if index < len(lost) else '-':>20}")
            lines.append(f"{index + 1:<11} " + " ".join(cells))
        lines.append(f"{'on notice':<11} {'preempt':>7} {'lost':>5} {'honoured':>9} "
                     f"{'resume s':>9} {'wall s':>7} {'accuracy':>8}")
        for row in compared:
            resume = row["mean_time_to_resume_s"]
            lines.append(
                f"{row['mode']:<11} {row['preemptions']:>7} {row['lost_steps']:>5} "
                f"{row['notices_honoured']:>4}/{row['notices']:<4} "
                f"{resume if resume is not None else float('nan'):>9.1f} "
                f"{row['wall_time_s']:>7.1f} {row['test_accuracy'] or float('nan'):>8.3f}")
        by_mode = {row["mode"]: row for row in compared}
        if set(by_mode) == set(MODES):
            ratio = by_mode["ignore"]["wall_time_s"] / by_mode["checkpoint"]["wall_time_s"]
            lines.append(f"wall time periodic-only / notice checkpoint: {ratio:.3f}")
        lines.append("```")
    for row in rows:
        if row["mode"] == "demo":
            lines += ["", "`invoke run-elastic` (the default demo):", "", "```",
                      f"command wall time {row['command_wall_time_s']:.0f} s (run "
                      f"{row['run_wall_time_s']:.0f} s), {row['preemptions']} preemptions, "
                      f"{row['lost_steps']} steps lost, {row['notices_honoured']}/"
                      f"{row['notices']} notices honoured ({row['notices_during_startup']} "
                      f"during a worker group's start-up), workers "
                      f"{' -> '.join(map(str, row['worker_counts']))}, test accuracy "
                      f"{row['test_accuracy']:.3f}", "```"]
    return "\n".join(lines)


def targets(rows: list[dict[str, Any]]) -> list[Target]:
    found = []
    for row in rows:
        if row["mode"] == "checkpoint":
            found += [Target("notice checkpoint: steps lost", row["lost_steps"], 0),
                      Target("notice checkpoint: notices not honoured",
                             row["notices"] - row["notices_honoured"], 0)]
        elif row["mode"] == "ignore":
            found.append(Target("notices ignored: steps lost", row["lost_steps"], 1,
                                at_most=False))
        elif row["mode"] == "demo":
            found += [Target("demo: preemptions", row["preemptions"], 3, at_most=False),
                      Target("demo: steps lost", row["lost_steps"], 0),
                      Target("demo: notices not honoured",
                             row["notices"] - row["notices_honoured"], 0),
                      Target("demo: test accuracy", row["test_accuracy"] or 0.0, 0.95,
                             at_most=False),
                      Target("demo: command wall time (s, quiet machine)",
                             row["command_wall_time_s"], DEMO_WALL_TARGET_S)]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.elastic_preemption",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--preemptions", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--step-time", type=float, default=0.6,
                        help="seconds a step takes on one worker (the script pads to it)")
    parser.add_argument("--checkpoint-every", type=int, default=50)
    parser.add_argument("--warning", type=float, default=6.0, help="lab seconds of notice")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modes", type=lambda text: text.split(","), default=list(MODES),
                        help="comma-separated: checkpoint,ignore (both: the comparison); "
                             "empty: none")
    parser.add_argument("--demo", action="store_true",
                        help="also time the default `invoke run-elastic`")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds each run may take")
    parser.add_argument("--keep", type=Path,
                        help="keep each run's results folder under this folder")
    parser.add_argument("--out", type=Path, help="write the table and targets here (.md)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    at = schedule(args.preemptions, args.steps, args.seed)
    print(f"interrupting at steps {at}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="elastic-bench-") as scratch:
        folder = args.keep or Path(scratch)
        for mode in [m for m in args.modes if m]:
            rows.append(run_mode(mode, at, args, folder))
            print(f"  {mode}: {rows[-1]}", flush=True)
        if args.demo:
            rows.append(run_demo(args, folder))
            print(f"  demo: {rows[-1]}", flush=True)
    checked = targets(rows)
    text = "\n\n".join([header(machine()), table(rows, args), targets_text(checked)])
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return exit_code(checked)


if __name__ == "__main__":
    sys.exit(main())
