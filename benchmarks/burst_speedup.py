"""Burst benchmark: both workloads at 30, 100 and 200 Mbit/s in the local two-site lab, both
schedulers side by side in each run; prints the speedup (default / data-aware) and each
scheduler's makespan / lower bound per case. Takes several minutes; needs the lab (root,
ip netns).

    python -m benchmarks.burst_speedup [--out DIR] [--bw 30,100,200] [--workload image]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from launch.burst import run_burst
from workloads.burst.options import BurstOptions

WORKLOADS = ("image", "param-server")


def row(workload: str, summary: dict[str, Any]) -> str:
    runs = summary["runs"]
    return (
        f"{workload:<13} {summary['bandwidth_mbit']:>8.0f} "
        f"{runs['default']['makespan_s']:>11.1f} {runs['data-aware']['makespan_s']:>11.1f} "
        f"{summary['lower_bound_s']:>8.1f} {summary['speedup']:>8.2f} "
        f"{runs['default']['makespan_over_bound']:>12.2f} "
        f"{runs['data-aware']['makespan_over_bound']:>12.2f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.burst_speedup",
                                     description=__doc__.splitlines()[0])
    stamp = time.strftime("%Y%m%dT%H%M%S")
    parser.add_argument(
        "--out", default=f"results/benchmarks/burst/{stamp}", help="folder for every case's results"
    )
    parser.add_argument("--bw", default="30,100,200", help="bandwidths in Mbit/s")
    parser.add_argument(
        "--workload", default=",".join(WORKLOADS), help="comma-separated: image, param-server"
    )
    args = parser.parse_args()
    workloads = args.workload.split(",")
    unknown = [name for name in workloads if name not in WORKLOADS]
    if unknown:
        print(f"error: --workload: expected image and/or param-server, got {unknown[0]!r}",
              file=sys.stderr)
        return 2
    out = Path(args.out)
    header = (
        f"{'workload':<13} {'Mbit/s':>8} {'default s':>11} {'data-aware s':>11} "
        f"{'bound s':>8} {'speedup':>8} {'default/LB':>12} {'aware/LB':>12}"
    )
    rows = []
    for workload in workloads:
        for bw in args.bw.split(","):
            print(f"=== {workload} at {bw} Mbit/s ===", flush=True)
            folder = run_burst(
                BurstOptions(workload=workload),
                float(bw),
                out / f"{workload}-{bw}",
                show=lambda line: None,
            )
            summary = json.loads((folder / "summary.json").read_text())
            rows.append(row(workload, summary))
            print(header + "\n" + rows[-1], flush=True)
    table = "\n".join([header, "-" * len(header), *rows])
    (out / "table.txt").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
