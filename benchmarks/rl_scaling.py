"""RL benchmark: what a spot preemption of an env runner costs. SAC on Pendulum-v1 on a local
spot lab, the same seed and settings without preemptions and with the spot node of an env
runner preempted after every `--preempt-every`-th iteration (a notice, a drain, a kill, a
replacement node), as `invoke run-rl` does on its lab. The runs alternate without, with,
with, without, ... (`--pairs`), so a change of the machine's load during the benchmark
weighs on both sides alike; each run has a new lab of its own.

Printed (and written to `--json`): each run's wall time, the learner's seconds updating,
waiting for samples and the rest, env steps, updates, final evaluation, preemptions and
restarts; the wall-time ratio with/without (of the sums, and per pair) and its target; the
bound — the sampling capacity the preemptions removed, as a wall-time ratio: 1 + (the
runner-seconds from each preempted node's kill until its runner sampled again, summed) /
(env runners × wall time without preemptions), what a run would lose if its env steps came
at the pace of the runners in service; and where the time went, from the runs' records: per
preemption its drain (notice to kill), detection (kill to the learner taking the runner out
of service), restart (to Ray having the runner up again), restore (to its first request,
with the weights) and warm-up (to its first fragment); and the extra wall time split into the
learner's updating, waiting and the rest. Exits 1 when the ratio misses its target (or no
preemption happened).

    python -m benchmarks.rl_scaling [--steps N] [--preempt-every 8] [--pairs 2] [--seed 0]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import procs
from benchmarks.report import Target, exit_code, header, machine, targets_text, write_output
from launch.rl import LabFaults
from spotlab import SpotLab, SpotLabConfig, spot_lab
from workloads.common.results import read_json, read_records
from workloads.common.storage import LocalStorage
from workloads.rl.options import RlOptions

REPO = Path(__file__).resolve().parents[1]
TARGET_RATIO = 1.15
ITERATION_STEPS = 200
TARGET_RETURN = -300.0
PHASES = ("drain", "detection", "restart", "restore", "warm-up")


def lab_config(spot: int, learner: int = 1) -> SpotLabConfig:
    """`learner` learner nodes and `spot` 1-CPU spot nodes; no preemption but the run's
    own (α = 1), the spot lab's default warning and replacement delay, no dashboard."""
    return SpotLabConfig(spot=spot, on_demand=0, learner=learner, cpus_per_node=1, alpha=1.0,
                         dashboard=False)


def drive(lab: SpotLab, args: list[str], out: Path, faults: LabFaults,
          show: Callable[[str], None] = lambda line: None,
          timeout_s: float = 7200.0) -> dict[str, Any]:
    """Run the workload on `lab` (a driver process with the lab's environment), feeding its
    lines to `faults`. Returns the exit code, the output lines and the faults injected."""

    def on_line(line: str) -> None:
        show(line)
        faults.feed(line)

    code, lines = procs.follow([sys.executable, "-m", "workloads.rl", *args, "--out", str(out)],
                               on_line, timeout_s=timeout_s, name="the RL run",
                               env=lab.driver_env, cwd=REPO)
    return {"returncode": code, "lines": lines, "faults": faults.record()}


def phases(events: list[dict[str, Any]], lab_events: list[dict[str, Any]],
           injected: list[dict[str, Any]], run_end: float) -> list[dict[str, Any]]:
    """Per preemption injected: its phases in seconds (see the module docstring) and the
    runner-seconds of sampling it removed (kill to the runner's first fragment after)."""
    measured = []
    for fault in injected:
        if fault["kind"] != "preempt":
            continue
        node = [e for e in lab_events if e["node"] == fault["node"]]
        notice = next((e["t"] for e in node if e["event"] == "notice"), None)
        kill = next((e["t"] for e in node if e["event"] == "kill"), None)
        lost = next((e for e in events if e["event"] == "lost"
                     and e.get("node") == fault["ray_node_id"]), None)
        row: dict[str, Any] = {"node": fault["node"], "after_iteration": fault["after_iteration"]}
        if notice is None or kill is None or lost is None:
            measured.append(row)
            continue
        after = [e for e in events if e["runner"] == lost["runner"] and e["epoch"] > lost["epoch"]]
        back = next((e for e in after if e["event"] == "back"), None)
        sampling = next((e for e in after if e["event"] == "sampling"), None)
        row |= {"drain": kill - notice, "detection": lost["epoch"] - kill}
        if back is not None:
            row["restart"] = back["epoch"] - lost["epoch"]
        if sampling is not None:
            row["restore"] = sampling["dispatched"] - back["epoch"] if back else None
            row["warm-up"] = sampling["epoch"] - sampling["dispatched"]
        row["capacity_removed_s"] = (sampling["epoch"] if sampling else run_end) - kill
        measured.append(row)
    return measured


def outcome(out: Path, lab: SpotLab, faults: dict[str, Any]) -> dict[str, Any]:
    storage = LocalStorage(out)
    summary = read_json(storage, "summary.json")
    rows = read_records(storage, "iterations")
    events = read_records(storage, "runner_events")
    curve = [(row["env_steps"], evaluation["return"]) for row in rows
             for evaluation in row["evaluations"]]
    run_end = summary["started_at"] + summary["wall_time_s"]
    return {**summary, "curve": curve, "faults": faults,
            "phases": phases(events, lab.events(), faults["injected"], run_end)}


def one_run(label: str, spot: int, args: list[str], preempt_every: int,
            folder: Path) -> dict[str, Any]:
    print(f"[{label}] lab: learner + {spot} spot nodes; workload {' '.join(args)}", flush=True)
    with spot_lab(lab_config(spot), progress=lambda line: None) as lab:
        faults = LabFaults(preempt_every, None, lab=lab)
        driven = drive(lab, args, folder / label, faults,
                       show=lambda line: print(f"  [{label}] {line}", flush=True)
                       if line.startswith(("iteration", "spot node", "final")) else None)
        if driven["returncode"] != 0:
            raise RuntimeError(f"{label}: the workload failed:\n"
                               + "\n".join(driven["lines"][-30:]))
        return {"label": label, **outcome(folder / label, lab, driven["faults"])}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _number(value: Any, form: str) -> str:
    return "-" if value is None else format(value, form)


def table(rows: list[dict[str, Any]]) -> str:
    header_line = (f"{'run':<22} {'steps':>6} {'updates':>7} {'wall s':>7} {'update s':>8} "
                   f"{'wait s':>6} {'other s':>7} {'final eval':>10} {'preempt':>7} "
                   f"{'restarts':>8}")
    lines = [header_line, "-" * len(header_line)]
    for row in rows:
        other = row["wall_time_s"] - row["learner_update_s"] - row["learner_wait_s"]
        lines.append(
            f"{row['label']:<22} {row['env_steps']:>6} {row['updates']:>7} "
            f"{row['wall_time_s']:>7.1f} {row['learner_update_s']:>8.1f} "
            f"{row['learner_wait_s']:>6.1f} {other:>7.1f} "
            f"{_number(row['last_eval_return'], '.1f'):>10} {row['preemptions']:>7} "
            f"{row['env_runner_restarts']:>8}")
    return "\n".join(lines)


def phase_table(measured: list[dict[str, Any]]) -> str:
    header_line = (f"{'preemption':<24}" + "".join(f"{name:>11}" for name in PHASES)
                   + f"{'removed s':>11}")
    lines = [header_line, "-" * len(header_line)]
    for row in measured:
        lines.append(f"{row['node'] + ' after it ' + str(row['after_iteration']):<24}"
                     + "".join(f"{_number(row.get(name), '.1f'):>11}" for name in PHASES)
                     + f"{_number(row.get('capacity_removed_s'), '.1f'):>11}")
    means = {name: _mean([row[name] for row in measured if row.get(name) is not None])
             for name in (*PHASES, "capacity_removed_s")}
    lines.append(f"{'mean':<24}" + "".join(f"{_number(means[name], '.1f'):>11}"
                                           for name in (*PHASES, "capacity_removed_s")))
    return "\n".join(lines)


def curves_side_by_side(runs: list[dict[str, Any]], every: int) -> str:
    """Mean evaluation return per `every` env steps, one column per run."""
    width = max(22, *(len(run["label"]) + 2 for run in runs))
    header_line = f"{'env steps':>11}" + "".join(f"{run['label']:>{width}}" for run in runs)
    lines = [header_line, "-" * len(header_line)]
    last = max((steps for run in runs for steps, _ in run["curve"]), default=0)
    for start in range(0, last + 1, every):
        cells = []
        for run in runs:
            values = [value for steps, value in run["curve"] if start < steps <= start + every]
            cells.append(f"{sum(values) / len(values):>{width}.1f}" if values else
                         f"{'-':>{width}}")
        lines.append(f"{start + every:>11}" + "".join(cells))
    return "\n".join(lines)


def compare(without: dict[str, Any], with_: dict[str, Any], runners: int) -> dict[str, Any]:
    """The ratio, the bound and the extra time's split between the two runs."""
    removed = sum(row.get("capacity_removed_s") or 0.0 for row in with_["phases"])
    base = without["wall_time_s"]
    split = {key: with_[key] - without[key]
             for key in ("wall_time_s", "learner_update_s", "learner_wait_s")}
    split["other_s"] = split["wall_time_s"] - split["learner_update_s"] - split["learner_wait_s"]
    return {"ratio": with_["wall_time_s"] / base,
            "bound": 1.0 + removed / (runners * base),
            "capacity_removed_runner_s": removed,
            "extra_s": split}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rl_scaling",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=RlOptions().steps,
                        help="env steps of each run (default: the workload's)")
    parser.add_argument("--runners", type=int, default=2, help="env runners of each run")
    parser.add_argument("--steps-per-iteration", type=int, default=ITERATION_STEPS,
                        help="env steps of an iteration (default: 200, as the preemption "
                        "rate was first measured)")
    parser.add_argument("--preempt-every", type=int, default=8,
                        help="iterations between preemptions in the preempted runs")
    parser.add_argument("--pairs", type=int, default=2,
                        help="pairs of runs, in the order without, with, with, without, ...")
    parser.add_argument("--curve-every", type=int, default=500,
                        help="env steps per line of the return curves")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path,
                        help="also write the report (markdown) to this file")
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    args = parser.parse_args(argv)
    load_before = [round(value, 2) for value in os.getloadavg()]
    workload = ["--seed", str(args.seed), "--steps", str(args.steps), "--env-runners",
                str(args.runners), "--steps-per-iteration", str(args.steps_per_iteration)]
    spot = args.runners + 1  # both labs alike: a spare spot node takes a preempted runner
    preempted = f"preempt every {args.preempt_every} it"
    order = [side for pair in range(args.pairs)
             for side in (("without", "with") if pair % 2 == 0 else ("with", "without"))]
    runs: dict[str, list[dict[str, Any]]] = {"without": [], "with": []}
    done = []  # in the order they ran
    with tempfile.TemporaryDirectory(prefix="rl-bench-") as temp:
        for number, side in enumerate(order, start=1):
            label = f"{'no preemptions' if side == 'without' else preempted} #{number}"
            every = args.preempt_every if side == "with" else 0
            done.append(one_run(label, spot, workload, every, Path(temp)))
            runs[side].append(done[-1])
    compared = compare(total(runs["without"]), total(runs["with"]), args.runners)
    pairs = [with_["wall_time_s"] / without["wall_time_s"]
             for without, with_ in zip(runs["without"], runs["with"], strict=True)]
    targets = [Target("wall time with / without preemptions", compared["ratio"],
                      TARGET_RATIO),
               Target("preemptions in the preempted runs",
                      sum(run["preemptions"] for run in runs["with"]), 1, at_most=False)]
    made = {**machine(), "load_average_before": load_before}
    extra = compared["extra_s"]
    text = "\n".join([
        f"{header(made)}; load average before: {' / '.join(f'{v:g}' for v in load_before)}",
        "",
        "```",
        f"SAC on Pendulum-v1, seed {args.seed}, {args.runners} env runners, "
        f"{args.steps} env steps, {args.steps_per_iteration} per iteration",
        table(done),
        "",
        f"wall time ratio {compared['ratio']:.3f} (of the sums; per pair "
        f"{', '.join(f'{ratio:.3f}' for ratio in pairs)}); bound {compared['bound']:.3f} "
        f"({compared['capacity_removed_runner_s']:.1f} runner-seconds of sampling removed "
        f"by {targets[1].measured:g} preemptions)",
        f"extra wall time {extra['wall_time_s']:+.1f} s: learner updating "
        f"{extra['learner_update_s']:+.1f} s, waiting for samples "
        f"{extra['learner_wait_s']:+.1f} s, other {extra['other_s']:+.1f} s",
        "",
        "Per preemption (seconds):",
        phase_table([row for run in runs["with"] for row in run["phases"]]),
        "",
        f"Mean evaluation return per {args.curve_every} env steps, same seed:",
        curves_side_by_side([runs["without"][0], runs["with"][0]], args.curve_every),
        "",
        targets_text(targets),
        "```",
    ])
    print("\n" + text)
    if args.out:
        write_output(args.out, text + "\n")
    if args.json:
        write_output(args.json, json.dumps({
            "made": made, "runs": runs, "compared": compared, "pair_ratios": pairs,
            "targets": [{"name": t.name, "measured": t.measured, "limit": t.limit,
                         "at_most": t.at_most, "met": t.met} for t in targets],
        }, indent=2) + "\n")
    return exit_code(targets)


def total(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The sums of the runs' seconds, and all their preemptions' phases."""
    keys = ("wall_time_s", "learner_update_s", "learner_wait_s")
    return {**{key: sum(run[key] for run in runs) for key in keys},
            "phases": [row for run in runs for row in run["phases"]]}


if __name__ == "__main__":
    sys.exit(main())
