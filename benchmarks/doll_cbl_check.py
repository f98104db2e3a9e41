"""DOLL's simulator against Can't Be Late's own, side by side on Can't Be Late's job: one
worker, 48 h of work, a 52 h deadline, 0.2 h restart overhead, V100 prices ($3.06/h on
demand, $0.9731/h spot), a public 1-node availability trace read as that simulator reads it
(1 = no spot), ten start points spread over it. Uniform Progress runs in that simulator
(benchmarks/cant_be_late.py: from the checkouts named, as it is) and DOLL's uniform-progress
in DOLL's simulator under `--rules cant-be-late`; per start point their cost and finish,
and the target: within 2 % of each other on every one.

Beside them, the same job under DOLL's own rules (no overhead on the first launch, a
decision at each change and every --adapt-interval, the trace looping, no notices here),
with the size of each difference. Writes table.md, rows.json and provenance.json to --out.

    python -m benchmarks.doll_cbl_check --cant-be-late FRONTIER_CS --uniform-progress
        SKYNOMAD_ARTIFACT --trace .../availability/1-node/aws-10-26-2022/us-west-2a_v100_1.json
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.cant_be_late import (
    DEADLINE_HOURS,
    OVERHEAD_HOURS,
    WORK_HOURS,
    cbl_runs,
    checkout_parser,
    doll_job,
    load_simulator,
)
from benchmarks.report import Target, finish
from workloads.common.provenance import provenance, sha256_of
from workloads.doll.replay import replay
from workloads.doll.sim import check_sim_inputs, start_points

TOLERANCE = 0.02


def measure(trace_file: Path, starts: int, frontier_cs: Path, skynomad: Path
            ) -> list[dict[str, Any]]:
    options = doll_job(trace_file, starts)
    prices, [trace] = check_sim_inputs(options)
    ticks = start_points(options, trace)
    simulator = load_simulator(frontier_cs, skynomad)
    theirs = cbl_runs(simulator, trace_file, ticks)
    config = options.job(0)
    own_rules = replace(config, rules="doll")
    rows = []
    for tick, cbl in zip(ticks, theirs, strict=True):
        row: dict[str, Any] = {"start": tick, "cbl_cost": cbl.cost,
                               "cbl_finish_hours": cbl.finish_hours}
        for label, run_config in (("cbl_rules", config), ("doll_rules", own_rules)):
            outcome = replay("uniform-progress", run_config, prices, trace, tick)
            row[f"{label}_cost"] = outcome.engine.meter.cost * run_config.compression
            row[f"{label}_finish_hours"] = outcome.finish_s * run_config.compression / 3600
        rows.append(row)
    return rows


def difference(mine: float, theirs: float) -> float:
    return mine / theirs - 1.0


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| start tick | Can't Be Late cost | DOLL (its rules) cost | difference | Can't Be "
             "Late finish (h) | DOLL (its rules) finish (h) | difference | DOLL's own rules: "
             "cost | finish (h) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(
            f"| {row['start']} | ${row['cbl_cost']:.2f} | ${row['cbl_rules_cost']:.2f} | "
            f"{difference(row['cbl_rules_cost'], row['cbl_cost']):+.2%} | "
            f"{row['cbl_finish_hours']:.2f} | {row['cbl_rules_finish_hours']:.2f} | "
            f"{difference(row['cbl_rules_finish_hours'], row['cbl_finish_hours']):+.2%} | "
            f"${row['doll_rules_cost']:.2f} "
            f"({difference(row['doll_rules_cost'], row['cbl_rules_cost']):+.1%}) | "
            f"{row['doll_rules_finish_hours']:.2f} "
            f"({difference(row['doll_rules_finish_hours'], row['cbl_rules_finish_hours']):+.1%})"
            f" |")
    own_cost = [difference(r["doll_rules_cost"], r["cbl_rules_cost"]) for r in rows]
    own_finish = [difference(r["doll_rules_finish_hours"], r["cbl_rules_finish_hours"])
                  for r in rows]
    lines += ["", f"DOLL's own rules against Can't Be Late's, same policy and start points: cost "
              f"{statistics.mean(own_cost):+.1%} on average ({min(own_cost):+.1%} to "
              f"{max(own_cost):+.1%}), finish {statistics.mean(own_finish):+.1%} "
              f"({min(own_finish):+.1%} to {max(own_finish):+.1%})."]
    return "\n".join(lines)


def targets(rows: list[dict[str, Any]]) -> list[Target]:
    worst_cost = max(abs(difference(r["cbl_rules_cost"], r["cbl_cost"])) for r in rows)
    worst_finish = max(abs(difference(r["cbl_rules_finish_hours"], r["cbl_finish_hours"]))
                       for r in rows)
    return [Target("largest cost difference, any start point", worst_cost, TOLERANCE),
            Target("largest finish difference, any start point", worst_finish, TOLERANCE)]


def main() -> int:
    args = checkout_parser("doll_cbl_check", __doc__.splitlines()[0]).parse_args()
    rows = measure(args.trace, args.starts, args.cant_be_late, args.uniform_progress)
    document = provenance({"starts": args.starts, "work_hours": WORK_HOURS,
                           "deadline_hours": DEADLINE_HOURS, "overhead_hours": OVERHEAD_HOURS},
                          {"trace": args.trace}, "local", {"seed": 0})
    return finish(args.out, [
        f"Can't Be Late's job: {WORK_HOURS:g} h of work, {DEADLINE_HOURS:g} h deadline, "
        f"{OVERHEAD_HOURS:g} h restart overhead, one worker, on {args.trace.name} (sha256 "
        f"{sha256_of(args.trace)}), {len(rows)} start points", table(rows)],
        rows, targets(rows), document)

if __name__ == "__main__":
    sys.exit(main())
