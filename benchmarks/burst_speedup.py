"""Burst benchmark: the original's four experiments, both workloads with the data on the
on-prem file system (nfs) and in S3 (s3), at 30, 50, 100 and 200 Mbit/s (the profiles shape
31, 55, 106 and 210) in the local two-site lab, three repeats per case, both schedulers side
by side in each repeat (`run-burst`: calibration, then default, then data-aware).

Per case, the median (min–max) over the repeats of: each scheduler's makespan, the lower
bound both are measured against (from the calibrated compute time per task, the bytes and the
shaped rate), data-aware / bound, default / bound, the speedup (default / data-aware), the
mean task compute time of each run and their ratio, the scheduler's CPU seconds and each
site's during each run, and the machine's load. The targets, on the medians: data-aware
within 1.15x of the bound and not slower than default with nfs, within 1.10x of the bound and
at least 1.10x faster than default with s3; in every case its tasks' mean compute time within
10 % of the default run's. A repeat in which data-aware was slower is listed with the
numbers that say why. Writes table.md (with how it was made: command, cores, load, date, commit),
table.json and speedup.png next to the cases, and exits 1 when a case misses a target.

Your own task file (`--script`, `--function`, `--inputs` as `run-burst -f` takes them) is
measured the same way instead of the built-in workloads; without `--inputs` it runs over
generated text files (48 of 4 MB: words drawn from a seeded vocabulary). Its targets, on the
medians: data-aware not slower than default, its tasks' compute within 10 %, and every
repeat's results identical between the schedulers and equal to calling the function in this
process on each input (the bound is shown; its 1.15× target is the built-in workloads').

Run it in chunks into one folder: every invocation adds its cases to --out (a repeat already
there is kept), and the table covers every case found there (earlier chunks included).

    python -m benchmarks.burst_speedup [--out DIR] [--bw 30,50,100,200] [--workload image]
                                       [--data nfs,s3] [--repeats 3] [--table-only]
    python -m benchmarks.burst_speedup --script examples/burst/word_stats.py --bw 30
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.report import (
    Target,
    exit_code,
    header,
    machine,
    relative_command,
    targets_text,
)
from launch.burst import run_burst
from workloads.burst.options import OWN, BurstOptions, own_entries
from workloads.common.user_code import function_of

WORKLOADS = ("image", "param-server")
ORDER = (*WORKLOADS, OWN)
TEXT_FILES = 48
TEXT_MB = 4.0
"""Generated inputs for a task file without --inputs: about a second of word counting and a
second at 30 Mbit/s per file on a two-core machine."""
BANDWIDTHS = "30,50,100,200"
DATA = ("nfs", "s3")
WITHIN = {"nfs": 1.15, "s3": 1.10}
"""Target: data-aware's makespan within this factor of the common lower bound, per data."""
SPEEDUP = {"nfs": 1.0, "s3": 1.10}
"""Target: default's makespan / data-aware's at least this, per data."""
COMPUTE_WITHIN = 1.10
"""Target: data-aware's mean task compute time within this factor of the default run's."""
LOAD_SAMPLE_S = 5.0
SITES = ("onprem", "cloud")


def case_row(summary: dict[str, Any], load: dict[str, float] | None = None) -> dict[str, Any]:
    """One repeat's numbers, every ratio against the summary's one lower bound."""
    runs = summary["runs"]
    default, aware = runs["default"], runs["data-aware"]
    row: dict[str, Any] = {
        "workload": summary["workload"],
        "data": summary.get("data", "nfs"),
        "bandwidth_mbit": summary["bandwidth_mbit"],
        "default_s": default["makespan_s"],
        "aware_s": aware["makespan_s"],
        "bound_s": summary["lower_bound_s"],
        "aware_over_bound": aware["makespan_over_bound"],
        "default_over_bound": default["makespan_over_bound"],
        "speedup": summary["speedup"],
        "default_compute_s": default["compute_s_mean"],
        "aware_compute_s": aware["compute_s_mean"],
        "compute_ratio": summary["compute_ratio"],
        "compute_cpu_ratio": summary.get("compute_cpu_ratio"),
        "aware_scheduler_cpu_s": aware["scheduler_cpu_s"],
        "default_scheduler_cpu_s": default["scheduler_cpu_s"],
        "load": (load or {}).get("mean"),
    }
    for name, run in (("default", default), ("aware", aware)):
        for site in SITES:
            row[f"{name}_{site}_cpu_s"] = run["site_cpu_s"].get(site)
            row[f"{name}_{site}_idle_s"] = run["idle_slot_s"].get(site)
            row[f"{name}_{site}_compute_s"] = run["compute_s_mean_by_site"].get(site)
        row[f"{name}_on_cloud"] = run["tasks_on_cloud"]
        shared = {tuple(summary.get("site_cpus", {}).get(site, [])): value
                  for site, value in run.get("others_cpu_s", {}).items()}
        row[f"{name}_others_cpu_s"] = sum(shared.values()) if shared else None
    return row


def why_slower(row: dict[str, Any]) -> str:
    """For a repeat in which data-aware was slower: what its numbers say, against default's."""
    parts = [f"data-aware {row['aware_s'] - row['default_s']:.1f} s slower"]
    if row["compute_ratio"] is not None:
        parts.append(f"its tasks computed {100 * (row['compute_ratio'] - 1):+.0f} % "
                     f"({row['aware_compute_s']:.2f} s vs {row['default_compute_s']:.2f} s)")
    idle = [f"{site} {row[f'aware_{site}_idle_s']:.1f} s vs {row[f'default_{site}_idle_s']:.1f} s"
            for site in SITES if row.get(f"aware_{site}_idle_s") is not None
            and row.get(f"default_{site}_idle_s") is not None]
    if idle:
        parts.append("slots idle " + ", ".join(idle))
    parts.append(f"tasks on the cloud {row['aware_on_cloud']} vs {row['default_on_cloud']}")
    if row.get("aware_others_cpu_s") is not None and row.get("default_others_cpu_s") is not None:
        parts.append(f"other processes' CPU on the sites' CPUs {row['aware_others_cpu_s']:.0f} s "
                     f"vs {row['default_others_cpu_s']:.0f} s")
    parts.append(f"default itself {row['default_over_bound']:.2f}x the bound")
    if row["load"] is not None:
        parts.append(f"load {row['load']:.1f}")
    return "; ".join(parts)


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def spread(values: list[float | None], digits: int) -> str:
    """median (min–max), or the one value; '-' when not measured."""
    present = [v for v in values if v is not None]
    if not present:
        return "-"
    middle = f"{median(present):.{digits}f}"
    if len(present) == 1:
        return middle
    return f"{middle} ({min(present):.{digits}f}–{max(present):.{digits}f})"


COLUMNS = (
    ("default s", "default_s", 1),
    ("data-aware s", "aware_s", 1),
    ("bound s", "bound_s", 1),
    ("data-aware/bound", "aware_over_bound", 2),
    ("default/bound", "default_over_bound", 2),
    ("speedup", "speedup", 2),
    ("compute s default", "default_compute_s", 2),
    ("compute s data-aware", "aware_compute_s", 2),
    ("compute ratio", "compute_ratio", 2),
)
CPU_COLUMNS = (
    ("CPU time ratio", "compute_cpu_ratio", 2),
    ("scheduler CPU s default", "default_scheduler_cpu_s", 1),
    ("scheduler CPU s data-aware", "aware_scheduler_cpu_s", 1),
    ("on-prem CPU s default", "default_onprem_cpu_s", 0),
    ("on-prem CPU s data-aware", "aware_onprem_cpu_s", 0),
    ("cloud CPU s default", "default_cloud_cpu_s", 0),
    ("cloud CPU s data-aware", "aware_cloud_cpu_s", 0),
    ("others' CPU s default", "default_others_cpu_s", 0),
    ("others' CPU s data-aware", "aware_others_cpu_s", 0),
    ("load", "load", 1),
)
CHECKS = (
    ("within", "within bound target"),
    ("not_slower", "speedup target"),
    ("compute_within", f"compute ≤ {COMPUTE_WITHIN}×"),
)


def case_name(case: dict[str, Any]) -> str:
    return f"{case['workload']} / {case['data']} at {case['bandwidth_mbit']:g} Mbit/s"


def aggregate(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (workload, data, bandwidth): every column's values over the repeats, the checks on
    their medians, and why data-aware was slower in any repeat where it was."""
    cases: dict[tuple[str, str, float], list[dict[str, Any]]] = {}
    for row in rows:
        cases.setdefault((row["workload"], row["data"], row["bandwidth_mbit"]), []).append(row)
    order = sorted(cases, key=lambda key: (ORDER.index(key[0]), DATA.index(key[1]), key[2]))
    table = []
    for key in order:
        repeats = cases[key]
        data = key[1]
        ratios = [r["compute_ratio"] for r in repeats if r["compute_ratio"] is not None]
        table.append({
            "workload": key[0],
            "data": data,
            "bandwidth_mbit": key[2],
            "repeats": len(repeats),
            "within_target": WITHIN[data],
            "speedup_target": SPEEDUP[data],
            **{column: [r.get(column) for r in repeats]
               for _, column, _ in (*COLUMNS, *CPU_COLUMNS)},
            "within": key[0] == OWN
            or median([r["aware_over_bound"] for r in repeats]) <= WITHIN[data],
            "outputs_match": [r.get("outputs_match") for r in repeats],
            "not_slower": median([r["speedup"] for r in repeats]) >= SPEEDUP[data],
            "compute_within": bool(ratios) and median(ratios) <= COMPUTE_WITHIN,
            "slower_repeats": [why_slower(r) for r in repeats if r["speedup"] < 1.0],
        })
    return table


def targets(table: list[dict[str, Any]]) -> list[Target]:
    """Per case, on the medians over its repeats: data-aware / bound, the speedup, the
    compute ratio."""
    found = []
    for case in table:
        name = case_name(case)
        ratios = [v for v in case["compute_ratio"] if v is not None]
        if case["workload"] == OWN:
            matched = [bool(m) for m in case["outputs_match"]]
            found.append(Target(f"{name}: repeats whose results equal the function's here",
                                sum(matched) / len(matched), 1.0, at_most=False))
        else:
            found.append(Target(f"{name}: data-aware / bound", median(case["aware_over_bound"]),
                                case["within_target"]))
        found += [
            Target(f"{name}: speedup", median(case["speedup"]), case["speedup_target"],
                   at_most=False),
            Target(f"{name}: data-aware / default mean compute",
                   median(ratios) if ratios else float("inf"), COMPUTE_WITHIN),
        ]
    return found


def markdown(table: list[dict[str, Any]]) -> str:
    """Two tables, median (min–max) over the repeats per case: the makespans against the
    bound with the checks on the medians (each with its target), then where the CPU went;
    then each slower repeat with its reasons."""
    def check_cells(case: dict[str, Any]) -> list[str]:
        limits = {"within": f"≤ {case['within_target']:g}",
                  "not_slower": f"≥ {case['speedup_target']:g}", "compute_within": ""}
        if case["workload"] == OWN:
            limits["within"] = "-"
        return [("yes" if case[check] else "no") + (f" ({limits[check]})" if limits[check]
                                                    else "") for check, _ in CHECKS]

    def rows(columns: tuple[tuple[str, str, int], ...], checks: bool) -> list[str]:
        head = ["workload", "data", "Mbit/s", "n", *(name for name, _, _ in columns)]
        head += [label for _, label in CHECKS] if checks else []
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for case in table:
            cells = [case["workload"], case["data"], f"{case['bandwidth_mbit']:g}",
                     str(case["repeats"])]
            cells += [spread(case[column], digits) for _, column, digits in columns]
            cells += check_cells(case) if checks else []
            lines.append("| " + " | ".join(cells) + " |")
        return lines

    lines = [*rows(COLUMNS, True), "", "Where the CPU went (seconds during each run; the "
             "scheduler runs on-prem; others' CPU: other processes' busy time on the sites' "
             "CPUs; load: the machine's 1-minute load average, benchmark included):", "",
             *rows(CPU_COLUMNS, False)]
    slower = [(case, why) for case in table for why in case["slower_repeats"]]
    if slower:
        lines += ["", "Repeats in which data-aware was slower than default:", ""]
        lines += [f"- {case_name(case)}: {why}" for case, why in slower]
    return "\n".join(lines)


def collect(out: Path) -> list[dict[str, Any]]:
    """Every finished repeat under `out` (this and earlier invocations); for a task file's,
    whether both schedulers' results equal the function's in this process."""
    rows = []
    expected: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for path in sorted(out.glob("*/summary.json")):
        summary = json.loads(path.read_text())
        if summary.get("bandwidth_mbit") is None or "default" not in summary["runs"]:
            continue
        load_file = path.parent / "load.json"
        load = json.loads(load_file.read_text()) if load_file.is_file() else None
        row = case_row(summary, load)
        if summary["workload"] == OWN:
            row["outputs_match"] = outputs_match(path.parent, expected)
        rows.append(row)
    return rows


def local_results(script: Path, function: str, inputs: Path) -> list[dict[str, Any]]:
    """The rows outputs/<scheduler>.jsonl should hold: the function called in this process
    on each input, in name order, through JSON as a task's result travels."""
    call = function_of(script, function, "--script", "--function")
    return [{"input": entry.name, "result": json.loads(json.dumps(call(str(entry))))}
            for entry in own_entries(inputs)]


def outputs_match(folder: Path, expected: dict[tuple[str, str, str], list[dict[str, Any]]],
                  ) -> bool:
    """Both schedulers' outputs in `folder` equal the function's results here (computed once
    per task file, function and inputs, kept in `expected`)."""
    parameters = json.loads((folder / "provenance.json").read_text())["parameters"]
    key = (parameters["script"], parameters["function"], parameters["inputs"])
    if key not in expected:
        expected[key] = local_results(Path(key[0]), key[1], Path(key[2]))
    runs = []
    for scheduler in ("default", "data-aware"):
        lines = (folder / "outputs" / f"{scheduler}.jsonl").read_text().splitlines()
        runs.append([json.loads(line) for line in lines])
    return all(rows == expected[key] for rows in runs)


def generated_texts(folder: Path, count: int = TEXT_FILES, megabytes: float = TEXT_MB,
                    seed: int = 0) -> Path:
    """`count` text files of about `megabytes` each under `folder`, words drawn (Zipf-like)
    from a vocabulary made from `seed`: the same files for the same arguments, written once
    (a hidden marker says they are complete; task inputs leave hidden names out)."""
    import numpy as np

    target = folder / f"texts-{count}x{megabytes:g}MB-seed{seed}"
    done = target / ".complete"
    if done.is_file():
        return target
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = np.array(["".join(rng.choice(letters, size=rng.integers(2, 10)))
                           for _ in range(5000)])
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)
    weights /= weights.sum()
    words = int(megabytes * 1e6 / 6.5)  # about 5.5 letters and a space per word
    for index in range(count):
        drawn = vocabulary[rng.choice(len(vocabulary), size=words, p=weights)]
        lines = [" ".join(drawn[i:i + 12]) for i in range(0, words, 12)]
        (target / f"text-{index:03d}.txt").write_text("\n".join(lines) + "\n")
    done.write_text(f"{count} files\n")
    return target


@contextmanager
def load_watch(path: Path) -> Iterator[None]:
    """The machine's 1-minute load average, sampled while the block runs, into `path`
    (mean and max; it counts the benchmark's own processes too)."""
    samples = [os.getloadavg()[0]]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(LOAD_SAMPLE_S):
            samples.append(os.getloadavg()[0])

    thread = threading.Thread(target=sample, name="load", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        path.write_text(json.dumps({
            "mean": round(statistics.fmean(samples), 2), "max": max(samples),
            "samples": len(samples), "cpus": os.cpu_count(),
        }) + "\n")


def draw(table: list[dict[str, Any]], path: Path) -> Path:
    """Per case and repeat: the speedup, data-aware / bound and the compute ratio against
    their targets; a repeat in which data-aware was slower is drawn red."""
    from workloads.common.figures import plt, save_figure

    labels = [f"{c['workload']} {c['data']} {c['bandwidth_mbit']:g} Mbit/s" for c in table]
    figure, axes = plt.subplots(1, 3, figsize=(max(15.0, 0.9 * len(table)), 5))
    panels = (("speedup", "speedup (default / data-aware)", "speedup_target"),
              ("aware_over_bound", "data-aware makespan / lower bound", "within_target"),
              ("compute_ratio", "mean compute: data-aware / default", None))
    for ax, (column, title, target_key) in zip(axes, panels, strict=True):
        for x, case in enumerate(table):
            target = COMPUTE_WITHIN if target_key is None else case[target_key]
            ax.hlines(target, x - 0.4, x + 0.4, color="tab:green", linestyle="--",
                      label="target" if x == 0 else None)
            values = [v for v in case[column] if v is not None]
            slower = [s is not None and s < 1.0 for s in case["speedup"]]
            colors = ["tab:red" if s else "tab:blue" for s in slower[: len(values)]]
            ax.scatter([x] * len(values), values, c=colors, zorder=3)
            if values:
                ax.hlines(median(values), x - 0.3, x + 0.3, color="black")
        ax.set_xticks(range(len(table)), labels, fontsize=8, rotation=35, ha="right")
        ax.set(title=title)
        ax.legend(fontsize=8)
    figure.suptitle("burst benchmark: each repeat (red: data-aware slower than default), "
                    "black line: median")
    return save_figure(figure, path)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.burst_speedup",
        description=" ".join((__doc__ or "").split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    stamp = time.strftime("%Y%m%dT%H%M%S")
    parser.add_argument(
        "--out", default=f"results/benchmarks/burst/{stamp}", help="folder for every case's results"
    )
    parser.add_argument("--bw", default=BANDWIDTHS, help="bandwidths in Mbit/s")
    parser.add_argument(
        "--workload", default=None,
        help=f"comma-separated: image, param-server (not set: both; with --script: {OWN})",
    )
    parser.add_argument("--data", default=",".join(DATA),
                        help="comma-separated: nfs (inputs on the on-prem file system), s3 "
                        "(inputs in the lab's bucket, at the cloud's end)")
    parser.add_argument("--script", type=Path, default=None,
                        help="your task file, measured instead of the built-in workloads")
    parser.add_argument("--function", default="process", help="--script: the task function")
    parser.add_argument("--inputs", type=Path, default=None,
                        help=f"--script: the folder of its inputs (not set: {TEXT_FILES} "
                        f"generated text files of {TEXT_MB:g} MB in --inputs-cache)")
    parser.add_argument("--repeats", default="3", help="runs per case (each runs both schedulers)")
    parser.add_argument(
        "--inputs-cache", default="results/benchmarks/burst/inputs",
        help="generated inputs kept across runs (each lab copies them instead of generating)",
    )
    parser.add_argument("--table-only", action="store_true",
                        help="run nothing; the table of the cases already in --out (its "
                        "header: how the last measuring invocation made them)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if args.script is not None and args.workload is not None:
        print("error: --workload: the built-in workloads or --script, not both",
              file=sys.stderr)
        return 2
    if args.script is None and (args.inputs is not None or args.function != "process"):
        print("error: --inputs/--function: give --script too", file=sys.stderr)
        return 2
    workloads = [OWN] if args.script is not None else (args.workload or ",".join(WORKLOADS)
                                                       ).split(",")
    unknown = [name for name in workloads if name not in WORKLOADS and args.script is None]
    if unknown:
        print(f"error: --workload: expected image and/or param-server, got {unknown[0]!r}",
              file=sys.stderr)
        return 2
    kinds = args.data.split(",")
    if any(kind not in DATA for kind in kinds):
        wrong = next(kind for kind in kinds if kind not in DATA)
        print(f"error: --data: expected nfs and/or s3, got {wrong!r}", file=sys.stderr)
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
    own: dict[str, Any] = {}
    if args.script is not None and not args.table_only:
        inputs = args.inputs
        if inputs is None:
            print(f"generating {TEXT_FILES} text files of {TEXT_MB:g} MB in {cache}", flush=True)
            inputs = generated_texts(cache)
        try:  # one line naming the file or the flag, before anything starts
            own = {"script": args.script, "function": args.function, "inputs": inputs}
            BurstOptions(**own)
            function_of(args.script, args.function, "--script", "--function")
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    runs = [] if args.table_only else [
        (workload, data, bw, repeat)
        for data in kinds
        for workload in workloads
        for bw in bandwidths
        for repeat in range(1, int(args.repeats) + 1)
    ]
    for number, (workload, data, bw, repeat) in enumerate(runs, 1):
        print(f"=== [{number}/{len(runs)}] {workload} / {data} at {bw:g} Mbit/s, repeat "
              f"{repeat} ===", flush=True)
        folder = out / f"{workload}-{data}-{bw:g}-r{repeat}"
        if (folder / "summary.json").is_file():
            print(f"already measured: {folder}", flush=True)
            continue
        if folder.exists():  # a repeat an interrupted chunk left half done: measured again
            shutil.rmtree(folder)
            print(f"removed the unfinished {folder}", flush=True)
        folder.mkdir(parents=True)
        with (out / f"{folder.name}.log").open("w") as log, load_watch(folder / "load.json"):
            options = (BurstOptions(**own, data=data) if workload == OWN
                       else BurstOptions(workload=workload, data=data, inputs_cache=str(cache)))
            run_burst(options, bw, folder, show=lambda line: print(line, file=log, flush=True))
        load = json.loads((folder / "load.json").read_text())
        row = case_row(json.loads((folder / "summary.json").read_text()), load)
        print(
            f"default {row['default_s']:.1f}s, data-aware {row['aware_s']:.1f}s, bound "
            f"{row['bound_s']:.1f}s, data-aware/bound {row['aware_over_bound']:.2f}, "
            f"speedup {row['speedup']:.2f}, compute ratio {row['compute_ratio']}, "
            f"load {load['mean']:.1f}",
            flush=True,
        )
    out.mkdir(parents=True, exist_ok=True)
    table = aggregate(collect(out))
    checked = targets(table)
    made = machine()
    if args.table_only and (out / "table.json").is_file():  # how the numbers were made
        made = json.loads((out / "table.json").read_text())["made"]
        made["command"] = relative_command(made["command"])
    (out / "table.json").write_text(json.dumps(
        {"made": made, "cases": table, "targets": [
            {"name": t.name, "measured": t.measured, "limit": t.limit, "met": t.met}
            for t in checked]}, indent=1) + "\n")
    text = "\n\n".join([header(made), markdown(table), targets_text(checked)])
    (out / "table.md").write_text(text + "\n")
    if table:
        draw(table, out / "speedup.png")
    print(text)
    if not table:
        print(f"error: no finished case in {out}", file=sys.stderr)
        return 1
    return exit_code(checked)


if __name__ == "__main__":
    sys.exit(main())
