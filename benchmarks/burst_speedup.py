"""Burst benchmark: both workloads at 30, 100 and 200 Mbit/s (the profiles shape 31, 106 and
210) in the local two-site lab, NFS data, both schedulers side by side in each run, each case
repeated; prints per case the mean (min-max over repeats) of each makespan, the bound, the
data-aware makespan / bound and the speedup (default / data-aware). Needs the lab (root,
ip netns); one case (one workload at one bandwidth, three repeats) takes a few minutes.

Run it in chunks into one folder: every invocation adds its cases to --out, and the table it
prints covers every case found there (earlier chunks included).

    python -m benchmarks.burst_speedup [--out DIR] [--bw 30,100,200] [--workload image]
                                       [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from launch.burst import run_burst
from workloads.burst.options import BurstOptions

WORKLOADS = ("image", "param-server")
WITHIN = 1.15
"""The target: data-aware within this factor of the lower bound in every case."""


def case_row(summary: dict[str, Any]) -> dict[str, Any]:
    """One repeat's numbers. Each scheduler's ratio is to the bound from its own measured
    compute times (summary.json's makespan_over_bound); `bound_s` is the data-aware run's."""
    runs = summary["runs"]
    default, aware = runs["default"], runs["data-aware"]
    return {
        "workload": summary["workload"],
        "bandwidth_mbit": summary["bandwidth_mbit"],
        "default_s": default["makespan_s"],
        "aware_s": aware["makespan_s"],
        "bound_s": aware["lower_bound_s"],
        "aware_over_bound": aware["makespan_over_bound"],
        "default_over_bound": default["makespan_over_bound"],
        "speedup": summary["speedup"],
    }


def spread(values: Sequence[float], digits: int) -> str:
    """mean (min-max), or the one value."""
    mean = f"{statistics.fmean(values):.{digits}f}"
    if len(values) == 1:
        return mean
    return f"{mean} ({min(values):.{digits}f}–{max(values):.{digits}f})"


COLUMNS = (
    ("default s", "default_s", 1),
    ("data-aware s", "aware_s", 1),
    ("bound s", "bound_s", 1),
    ("data-aware/bound", "aware_over_bound", 2),
    ("default/bound", "default_over_bound", 2),
    ("speedup", "speedup", 2),
)


def aggregate(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (workload, bandwidth): every column's values over the repeats, and the checks."""
    cases: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for row in rows:
        cases.setdefault((row["workload"], row["bandwidth_mbit"]), []).append(row)
    order = sorted(cases, key=lambda key: (WORKLOADS.index(key[0]), key[1]))
    table = []
    for key in order:
        repeats = cases[key]
        table.append({
            "workload": key[0],
            "bandwidth_mbit": key[1],
            "repeats": len(repeats),
            **{field: [r[field] for r in repeats] for _, field, _ in COLUMNS},
            "within": all(r["aware_over_bound"] <= WITHIN for r in repeats),
            "not_slower": all(r["aware_s"] <= r["default_s"] for r in repeats),
        })
    return table


def markdown(table: list[dict[str, Any]]) -> str:
    """The README's table: mean (min–max) over the repeats per case."""
    head = ["workload", "Mbit/s", "n", *(name for name, _, _ in COLUMNS),
            f"≤ {WITHIN}× bound", "never slower"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case in table:
        cells = [case["workload"], f"{case['bandwidth_mbit']:g}", str(case["repeats"])]
        cells += [spread(case[field], digits) for _, field, digits in COLUMNS]
        cells += ["yes" if case["within"] else "no", "yes" if case["not_slower"] else "no"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def collect(out: Path) -> list[dict[str, Any]]:
    """Every finished repeat under `out` (this and earlier invocations)."""
    rows = []
    for path in sorted(out.glob("*/summary.json")):
        summary = json.loads(path.read_text())
        if summary.get("bandwidth_mbit") is None or "default" not in summary["runs"]:
            continue
        rows.append(case_row(summary))
    return rows


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
    parser.add_argument("--repeats", default="3", help="runs per case (each runs both schedulers)")
    parser.add_argument(
        "--inputs-cache", default="results/benchmarks/burst/inputs",
        help="generated inputs kept across runs (each lab copies them instead of generating)",
    )
    parser.add_argument("--table-only", action="store_true",
                        help="run nothing; print the table of the cases already in --out")
    args = parser.parse_args()
    workloads = args.workload.split(",")
    unknown = [name for name in workloads if name not in WORKLOADS]
    if unknown:
        print(f"error: --workload: expected image and/or param-server, got {unknown[0]!r}",
              file=sys.stderr)
        return 2
    if not args.repeats.isdigit() or int(args.repeats) < 1:
        print(f"error: --repeats: expected an integer ≥ 1, got {args.repeats!r}", file=sys.stderr)
        return 2
    try:
        bandwidths = [float(bw) for bw in args.bw.split(",")]
    except ValueError:
        print(f"error: --bw: expected comma-separated numbers, got {args.bw!r}", file=sys.stderr)
        return 2
    out = Path(args.out)
    cache = Path(args.inputs_cache).resolve()
    runs = [] if args.table_only else [
        (workload, bw, repeat)
        for workload in workloads
        for bw in bandwidths
        for repeat in range(1, int(args.repeats) + 1)
    ]
    for number, (workload, bw, repeat) in enumerate(runs, 1):
        print(f"=== [{number}/{len(runs)}] {workload} at {bw:g} Mbit/s, repeat {repeat} ===",
              flush=True)
        folder = out / f"{workload}-{bw:g}-r{repeat}"
        if (folder / "summary.json").is_file():
            print(f"already measured: {folder}", flush=True)
            continue
        out.mkdir(parents=True, exist_ok=True)
        with (out / f"{folder.name}.log").open("w") as log:
            options = BurstOptions(workload=workload, inputs_cache=str(cache))
            run_burst(options, bw, folder, show=lambda line: print(line, file=log, flush=True))
        row = case_row(json.loads((folder / "summary.json").read_text()))
        print(
            f"default {row['default_s']:.1f}s, data-aware {row['aware_s']:.1f}s, bound "
            f"{row['bound_s']:.1f}s, data-aware/bound {row['aware_over_bound']:.2f}, "
            f"speedup {row['speedup']:.2f}",
            flush=True,
        )
    out.mkdir(parents=True, exist_ok=True)
    table = aggregate(collect(out))
    (out / "table.json").write_text(json.dumps(table, indent=1) + "\n")
    text = markdown(table)
    (out / "table.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
