"""DOLL cost benchmark: every policy over several seeds and both price traces of the paper
(SUSE Linux against $0.286/h, Linux/UNIX against $0.186/h), on one local Ray.

Prints, per trace and policy: the measured cost ratio to on-demand (mean and range over
seeds), the ratio the chosen allocation predicts, the paper's continuous bound, the
fraction of seeds that met the deadline, the mean finish/deadline, and the Ray overhead per
parameter-server update as a fraction of the update's time.

    python -m benchmarks.doll_cost [--seeds 0,1,2] [--preemption markov|kill] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from workloads.common.actors import start_actor
from workloads.common.ray_session import ray_session
from workloads.doll.experiment import run_policies, start_servers, with_cost_ratios
from workloads.doll.options import DollOptions
from workloads.doll.price_server import PriceServer
from workloads.doll.trace import load_trace

TRACES = (("SUSE Linux", 0.286), ("Linux/UNIX", 0.186))


def measure(seeds: list[int], preemption: str) -> list[dict[str, Any]]:
    base = DollOptions(preemption=preemption)
    rows: list[dict[str, Any]] = []
    shared = start_servers(base, load_trace(base.trace, base.zone, TRACES[0][0]))
    try:
        for product, on_demand_price in TRACES:
            trace = load_trace(base.trace, base.zone, product)
            servers = replace(
                shared,
                price_server=start_actor(PriceServer, trace, base.compression),
                mean_spot_price=trace.mean_price(),
            )
            for seed in seeds:
                config = replace(base, product=product, on_demand_price=on_demand_price, seed=seed)
                results = run_policies(config, servers, lambda line: None)
                for policy, summary in with_cost_ratios(config, results).items():
                    rows.append({"product": product, "seed": seed, "policy": policy, **summary})
                    print(
                        f"  {product} seed {seed} {policy}: ratio {summary['cost_ratio']:.3f}"
                        f" finish/deadline {summary['finish_s'] / summary['deadline_s']:.3f}",
                        flush=True,
                    )
    finally:
        shared.fleet.shutdown()
    return rows


def table(rows: list[dict[str, Any]], seeds: list[int]) -> str:
    header = (
        f"{'trace':<11} {'policy':<10} {'cost ratio (min-max)':<22} {'expected':>8} "
        f"{'bound':>6} {'met':>5} {'finish/θ':>8} {'accuracy':>8} {'Ray ovh':>7}"
    )
    lines = [
        f"DOLL cost benchmark: 16 workers, θ/θ₀ 1.05, α 0.9, seeds {seeds}",
        header,
        "-" * len(header),
    ]
    for product, _ in TRACES:
        for policy in ("on-demand", "static", "adaptive"):
            mine = [r for r in rows if r["product"] == product and r["policy"] == policy]
            if not mine:
                continue
            ratios = [r["cost_ratio"] for r in mine]
            bound = mine[0]["cost_bound"]
            lines.append(
                f"{product:<11} {policy:<10} "
                f"{statistics.mean(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})    "
                f"{statistics.mean(r['cost_expected'] for r in mine):>8.3f} "
                f"{'-' if bound is None else f'{bound:.3f}':>6} "
                f"{sum(r['deadline_met'] for r in mine)}/{len(mine):<3} "
                f"{statistics.mean(r['finish_s'] / r['deadline_s'] for r in mine):>8.3f} "
                f"{min(r['accuracy'] for r in mine):>8.3f} "
                f"{statistics.mean(r['ray_overhead_fraction'] for r in mine):>7.2f}"
            )
    lines.append(
        "met: seeds that finished by the deadline; accuracy: the lowest over seeds; "
        "Ray ovh: share of a parameter-server update spent in Ray calls, not compute"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.doll_cost",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    parser.add_argument(
        "--preemption",
        choices=("markov", "kill"),
        default="markov",
        help="preemption mode of the spot workers",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    seeds = [int(seed) for seed in args.seeds.split(",")]
    started = time.monotonic()
    with ray_session():
        rows = measure(seeds, args.preemption)
    print(table(rows, seeds))
    print(f"wall time {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
