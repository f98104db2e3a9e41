"""How fast DOLL's simulator replays a policy, against Can't Be Late's simulator on the same
job in the same benchmark run: runs per second and trace-hours per second on one core (CPU
time of this single-threaded process, so that other work on the machine counts less).

- One worker, Can't Be Late's job (48 h of work, 52 h deadline, 0.2 h overhead) on a 1-node
  availability trace, the same start points: Can't Be Late's Uniform Progress in its own
  simulator (benchmarks/cant_be_late.py, its fastest configuration), and in DOLL's simulator
  uniform-progress, fallback and a user's class (examples/doll/margin.py:Margin2), each
  called at every decision: under `--rules cant-be-late` (a decision every tick, as that
  simulator makes) and under DOLL's rules (a decision at every change, and every tick by
  --adapt-interval). Target: DOLL's runs per second ≥ 3× Can't Be Late's, for every
  policy, under both.
- 16 and 1,024 workers on a 16-node availability trace (the same 48 h job, DOLL's rules):
  runs and trace-hours per second; target: a 1,024-worker run in ≤ 1 s.
- The cost of a decision as the run grows: one worker, the same job ten times longer (480 h
  of work, the trace looping): CPU time per decision against the 48 h job's; target ≤ 1.5.

Each measurement is repeated (--repeat) with Can't Be Late's and DOLL's interleaved; the
fastest repeat of each counts. Writes table.md and rows.json to --out.

    python -m benchmarks.doll_sim_speed --cant-be-late FRONTIER_CS --uniform-progress
        SKYNOMAD_ARTIFACT --trace .../1-node/aws-10-26-2022/us-west-2a_v100_1.json
        --multi-node-trace .../16-node/aws-08-27-2023/us-east-2b_v100_1.json
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.cant_be_late import cbl_runs, checkout_parser, doll_job, load_simulator
from benchmarks.report import Target, finish
from workloads.common.spot_market.capacity import CapacityTrace
from workloads.common.spot_market.trace import PriceTrace
from workloads.doll.options import SimOptions
from workloads.doll.replay import replay
from workloads.doll.sim import check_sim_inputs, start_points

POLICIES = ("uniform-progress", "fallback", "examples/doll/margin.py:Margin2")
FLEETS = (16, 1024)
SPEEDUP = 3.0
LARGE_RUN_S = 1.0
GROWTH = 1.5
LONGER = 10


def cpu_seconds(work: Callable[[], Any]) -> tuple[float, Any]:
    began = time.process_time()
    result = work()
    return time.process_time() - began, result


def doll_runs(entry: str, config: SimOptions, prices: PriceTrace, trace: CapacityTrace,
              starts: list[int]) -> tuple[float, int]:
    """(trace hours replayed, decisions) over the start points."""
    hours, decisions = 0.0, 0
    for start in starts:
        outcome = replay(entry, config, prices, trace, start)
        hours += outcome.finish_s * config.compression / 3600
        decisions += outcome.engine.decisions
    return hours, decisions


def fastest(repeats: list[tuple[float, Any]]) -> tuple[float, Any]:
    return min(repeats, key=lambda repeat: repeat[0])


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    simulator = load_simulator(args.cant_be_late, args.uniform_progress)
    options = doll_job(args.trace, args.starts, policies=POLICIES)
    prices, [trace] = check_sim_inputs(options)
    starts = start_points(options, trace)
    cbl_rules = options.job(0)
    tick_s = trace.gap_s / cbl_rules.compression
    doll_rules = replace(cbl_rules, rules="doll", adapt_interval_s=tick_s)
    rows: list[dict[str, Any]] = []
    theirs: list[tuple[float, Any]] = []
    ours: dict[tuple[str, str], list[tuple[float, Any]]] = {}
    for _ in range(args.repeat):
        theirs.append(cpu_seconds(partial(cbl_runs, simulator, args.trace, starts)))
        for entry in POLICIES:
            for rules, config in (("cant-be-late", cbl_rules), ("doll", doll_rules)):
                ours.setdefault((entry, rules), []).append(cpu_seconds(
                    partial(doll_runs, entry, config, prices, trace, starts)))
    cpu, runs = fastest(theirs)
    cbl_hours = sum(run.finish_hours for run in runs)
    rows.append({"simulator": "Can't Be Late", "policy": "rc_cr_threshold (Uniform Progress)",
                 "rules": "cant-be-late", "workers": 1, "runs": len(starts), "cpu_s": cpu,
                 "runs_per_s": len(starts) / cpu, "trace_hours_per_s": cbl_hours / cpu,
                 "decisions": sum(run.ticks for run in runs)})
    for (entry, rules), repeats in ours.items():
        cpu, (hours, decisions) = fastest(repeats)
        rows.append({"simulator": "DOLL", "policy": entry.rpartition(":")[2] or entry,
                     "rules": rules, "workers": 1, "runs": len(starts), "cpu_s": cpu,
                     "runs_per_s": len(starts) / cpu, "trace_hours_per_s": hours / cpu,
                     "decisions": decisions})
    rows += fleets(args, prices)
    rows += growth(doll_rules, prices, trace, args.repeat)
    return rows


def fleets(args: argparse.Namespace, prices: PriceTrace) -> list[dict[str, Any]]:
    rows = []
    for workers in FLEETS:
        options = replace(doll_job(args.multi_node_trace, args.starts,
                                   policies=POLICIES[:2], workers=workers),
                          rules="doll", capacity_reading="count")
        _, [trace] = check_sim_inputs(options)
        starts = start_points(options, trace)
        config = options.job(0)
        for entry in POLICIES[:2]:
            timed = [cpu_seconds(partial(replay, entry, config, prices, trace, start))
                     for start in starts]
            cpu = sum(t for t, _ in timed)
            hours = sum(o.finish_s * config.compression / 3600 for _, o in timed)
            rows.append({"simulator": "DOLL", "policy": entry, "rules": "doll",
                         "workers": workers, "runs": len(starts), "cpu_s": cpu,
                         "runs_per_s": len(starts) / cpu, "trace_hours_per_s": hours / cpu,
                         "slowest_run_s": max(t for t, _ in timed),
                         "decisions": sum(o.engine.decisions for _, o in timed)})
    return rows


def growth(config: SimOptions, prices: PriceTrace, trace: CapacityTrace,
           repeat: int) -> list[dict[str, Any]]:
    """CPU time per decision of the 48 h job and of one LONGER times longer (from tick 0)."""
    rows = []
    for factor in (1, LONGER):
        longer = replace(config, work_hours=None, deadline_hours=None,
                         batches=config.batches * factor)
        cpu, (hours, decisions) = fastest([cpu_seconds(
            partial(doll_runs, "uniform-progress", longer, prices, trace, [0]))
            for _ in range(repeat)])
        rows.append({"simulator": "DOLL", "policy": "uniform-progress", "rules": "doll",
                     "workers": 1, "runs": 1, "cpu_s": cpu, "work_hours": hours,
                     "decisions": decisions, "cpu_per_decision_us": cpu / decisions * 1e6,
                     "growth": factor})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    cbl = rows[0]["runs_per_s"]
    lines = ["| simulator | policy | rules | workers | runs | decisions | CPU s | runs/s | "
             "trace-hours/s | vs Can't Be Late |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        if "growth" in row:
            continue
        versus = f"{row['runs_per_s'] / cbl:.2f}×" if row["workers"] == 1 else "-"
        lines.append(f"| {row['simulator']} | {row['policy']} | {row['rules']} | "
                     f"{row['workers']} | {row['runs']} | {row['decisions']} | "
                     f"{row['cpu_s']:.3f} | {row['runs_per_s']:.1f} | "
                     f"{row['trace_hours_per_s']:.0f} | {versus} |")
    short, long = [row for row in rows if "growth" in row]
    lines += ["", f"Cost of a decision as the run grows (uniform-progress, one worker, DOLL's "
              f"rules, from tick 0): {short['work_hours']:.0f} h of trace, "
              f"{short['decisions']} decisions, {short['cpu_per_decision_us']:.1f} µs each; "
              f"{long['work_hours']:.0f} h, {long['decisions']} decisions, "
              f"{long['cpu_per_decision_us']:.1f} µs each."]
    return "\n".join(lines)


def targets(rows: list[dict[str, Any]]) -> list[Target]:
    cbl = rows[0]["runs_per_s"]
    found = [Target(f"{row['policy']} ({row['rules']} rules) runs/s ÷ Can't Be Late's",
                    row["runs_per_s"] / cbl, SPEEDUP, at_most=False)
             for row in rows[1:] if row["workers"] == 1 and "growth" not in row]
    found += [Target(f"{row['policy']}, {row['workers']} workers: slowest run (s)",
                     row["slowest_run_s"], LARGE_RUN_S)
              for row in rows if row["workers"] == max(FLEETS)]
    short, long = [row for row in rows if "growth" in row]
    found.append(Target(f"CPU per decision, a {LONGER}× longer run ÷ the 48 h run's",
                        long["cpu_per_decision_us"] / short["cpu_per_decision_us"], GROWTH))
    return found


def main() -> int:
    parser = checkout_parser("doll_sim_speed", __doc__.splitlines()[0])
    parser.add_argument("--multi-node-trace", type=Path, required=True,
                        help="a 16-node availability trace of spot-traces (counts)")
    parser.add_argument("--repeat", type=int, default=3, help="repeats; the fastest counts")
    args = parser.parse_args()
    rows = measure(args)
    return finish(args.out, [
        f"Traces: {args.trace.name} (1 worker), {args.multi_node_trace.name} "
        f"({', '.join(map(str, FLEETS))} workers); {args.starts} start points; CPU time of "
        f"one core, fastest of {args.repeat} repeats", table(rows)], rows, targets(rows))

if __name__ == "__main__":
    sys.exit(main())
