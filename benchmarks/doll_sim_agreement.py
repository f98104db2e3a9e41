"""DOLL's simulator against the lab: the same policies, capacity traces, start points and
seeds run on Ray actors (run-doll's engine on the wall clock, one fleet per trace) and in
the simulator (the same engine from event to event), run by run side by side. A run agrees
when its cost ratio is within 0.03, its finish within 5 % and its deadline met in both or
missed in both; target: at least 9 runs in 10 agree. The simulator's workers receive
their points with the gaps the lab's workers draw from the same seed (`--arrivals
exponential`). A difference is a bug in one of them, or an effect the simulator does not
model (the lab's loop taking a change at its next step, the parameter server's and Ray's
own delays): the table shows each run's differences so their size can be read. Each lab
run is made --lab-repeats times: how far the lab is from itself, under the same
tolerances, is the floor of what any simulator can agree with.

    python -m benchmarks.doll_sim_agreement [--capacity-trace A.json ...] [--starts 4]
        [--seeds 0] [--policy on-demand,fallback,uniform-progress] [--lab-repeats 2]
        [--out DIR]

Writes table.md, rows.json and provenance.json to --out.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from benchmarks.doll_cost import prefixed
from benchmarks.report import Target, finish
from workloads.common.provenance import provenance, sha256_of
from workloads.common.ray_session import ray_session
from workloads.common.spot_market.capacity import load_capacity_trace
from workloads.common.spot_market.trace import job_prices
from workloads.doll.experiment import run_policies, start_servers, with_cost_ratios
from workloads.doll.options import DollJob, DollOptions, SimOptions
from workloads.doll.sim import run_group, start_points

RATIO_WITHIN = 0.03
FINISH_WITHIN = 0.05
AGREEING = 0.9
DEFAULT_TRACE = Path(__file__).resolve().parents[1] / "examples/doll/traces/zone-b.json"


def simulator_options(lab: DollOptions) -> SimOptions:
    """The simulator's options for a lab run: every value of the job they share."""
    shared = {spec.name: getattr(lab, spec.name) for spec in fields(DollJob)}
    assert lab.capacity_trace is not None
    return SimOptions(**shared, capacity_trace=(lab.capacity_trace,), start=(lab.start or 0,),
                      arrivals="exponential")


def measure(base: DollOptions, traces: list[Path], starts: int, seeds: list[int],
            repeats: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    prices = job_prices(base.trace, base.zone, base.product, base.spot_price)
    for path in traces:
        trace = load_capacity_trace(path, base.capacity_reading)
        points = start_points(replace(simulator_options(replace(base, capacity_trace=path)),
                                      start=None, starts=starts), trace)
        servers = start_servers(base, prices, capacity=trace)
        try:
            for start in points:
                for seed in seeds:
                    config = replace(base, capacity_trace=path, start=start, seed=seed)
                    where = f"{path.name} start {start} seed {seed}"
                    labs = [with_cost_ratios(config, run_policies(
                        config, servers, prefixed(f"  {where} lab run {repeat + 1}")))
                        for repeat in range(repeats)]
                    simulated = {row["policy"]: row for row in run_group(
                        simulator_options(config), prices, trace, start, seed, {})}
                    for policy, result in labs[0].items():
                        row = compare(path.name, start, seed, policy, result,
                                      simulated[policy])
                        row["lab_again"] = [compare(path.name, start, seed, policy, result,
                                                    again[policy])
                                            for again in labs[1:]]
                        rows.append(row)
                        print(f"  {where} {policy}: "
                              f"{'agrees' if row['agrees'] else 'DIFFERS'}", flush=True)
        finally:
            servers.fleet.shutdown()
    return rows


def compare(trace: str, start: int, seed: int, policy: str, lab: dict[str, Any],
            sim: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"trace": trace, "start": start, "seed": seed, "policy": policy,
                           "lab_failed": lab.get("failed"), "sim_failed": sim.get("failed")}
    if "failed" in lab or sim.get("failed"):
        return {**row, "agrees": False}
    ratio = sim["cost_ratio"] - lab["cost_ratio"]
    finish = sim["finish_s"] / lab["finish_s"] - 1.0
    return {**row, "lab_cost_ratio": lab["cost_ratio"], "sim_cost_ratio": sim["cost_ratio"],
            "lab_finish_s": lab["finish_s"], "sim_finish_s": sim["finish_s"],
            "deadline_s": lab["deadline_s"], "lab_deadline_met": lab["deadline_met"],
            "sim_deadline_met": sim["deadline_met"], "ratio_difference": ratio,
            "finish_difference": finish,
            "agrees": abs(ratio) <= RATIO_WITHIN and abs(finish) <= FINISH_WITHIN
            and lab["deadline_met"] == sim["deadline_met"]}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| trace | start | seed | policy | cost ratio lab | sim | difference | finish lab "
             "(s) | sim (s) | difference | deadline met lab / sim | agrees | the lab again: "
             "cost ratio, finish, within the tolerances |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        again = "; ".join(
            f"{other['ratio_difference']:+.3f}, {other['finish_difference']:+.1%}, "
            f"{'yes' if other['agrees'] else 'NO'}" for other in row.get("lab_again", [])
            if "ratio_difference" in other) or "-"
        if "lab_cost_ratio" not in row:
            lines.append(f"| {row['trace']} | {row['start']} | {row['seed']} | {row['policy']} "
                         f"| failed: {row['lab_failed'] or row['sim_failed']} |||||||| no | "
                         f"{again} |")
            continue
        lines.append(
            f"| {row['trace']} | {row['start']} | {row['seed']} | {row['policy']} | "
            f"{row['lab_cost_ratio']:.3f} | {row['sim_cost_ratio']:.3f} | "
            f"{row['ratio_difference']:+.3f} | {row['lab_finish_s']:.2f} | "
            f"{row['sim_finish_s']:.2f} | {row['finish_difference']:+.1%} | "
            f"{_yes(row['lab_deadline_met'])} / {_yes(row['sim_deadline_met'])} | "
            f"{'yes' if row['agrees'] else 'NO'} | {again} |")
    pairs = [other for row in rows for other in row.get("lab_again", [])]
    if pairs:
        same = sum(1 for other in pairs if other["agrees"])
        lines += ["", f"The lab against itself (a repeated run against the first, the same "
                  f"tolerances): {same} of {len(pairs)} within them."]
    return "\n".join(lines)


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def targets(rows: list[dict[str, Any]]) -> list[Target]:
    agreeing = sum(1 for row in rows if row["agrees"]) / len(rows)
    return [Target(f"runs agreeing (cost ratio within {RATIO_WITHIN}, finish within "
                   f"{FINISH_WITHIN:.0%}, same deadline outcome)", agreeing, AGREEING,
                   at_most=False)]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.doll_sim_agreement",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--capacity-trace", type=Path, nargs="+", default=[DEFAULT_TRACE],
                        metavar="JSON", help="capacity traces (the spot-traces format, "
                        "read as counts); default: examples/doll/traces/zone-b.json")
    parser.add_argument("--starts", type=int, default=4, help="start points on each trace")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds")
    parser.add_argument("--policy", default="on-demand,fallback,uniform-progress",
                        help="comma-separated policies (on-demand is the cost reference)")
    parser.add_argument("--lab-repeats", type=int, default=2,
                        help="lab runs of each policy, start and seed (the first is compared "
                        "with the simulator, the others with the first)")
    stamp = time.strftime("%Y%m%dT%H%M%S")
    parser.add_argument("--out", type=Path,
                        default=Path(f"results/benchmarks/doll_sim_agreement/{stamp}"))
    args = parser.parse_args()
    seeds = [int(seed) for seed in args.seeds.split(",")]
    base = DollOptions(policies=tuple(args.policy.split(",")),
                       capacity_trace=args.capacity_trace[0])
    started = time.monotonic()
    with ray_session():
        rows = measure(base, args.capacity_trace, args.starts, seeds, args.lab_repeats)
    print(f"wall time {time.monotonic() - started:.0f} s")
    document = provenance({**base.parameters(), "starts": args.starts, "seeds": seeds,
                           "lab_repeats": args.lab_repeats},
                          {f"capacity_trace {path.name}": path for path in args.capacity_trace},
                          "local", {"first": seeds[0]})
    return finish(args.out, [
        f"{base.workers} workers, θ/θ₀ {base.deadline_factor}, {base.batches} batches; the "
        f"simulator's arrivals exponential; traces: "
        + ", ".join(f"{path.name} (sha256 {sha256_of(path)})" for path in args.capacity_trace),
        table(rows)], rows, targets(rows), document)

if __name__ == "__main__":
    sys.exit(main())
