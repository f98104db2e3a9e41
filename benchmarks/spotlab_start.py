"""How fast a spot lab comes up, and how fast a replacement node joins.

Brings a lab of a head and --nodes spot worker nodes up --repeats times; in each, once it is
up, preempts one spot node (a notice, the drain, the kill at the deadline) and waits for its
replacement to join. Prints, per repeat and over all of them, the seconds from the start to
the lab being ready (every node joined Ray), from the notice to the node's agent draining it,
from the notice's deadline to the kill, and from the end of the replace delay to the
replacement's join, against the targets; writes the numbers to --out (as .json) and the
report with how it was made (as .md), and exits 1 when the slowest repeat misses a target.

--load N runs N busy processes beside the lab meanwhile (a loaded machine); the load average
before and after each repeat is recorded either way.

    python -m benchmarks.spotlab_start [--repeats 3] [--nodes 4] [--load 0] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import procs
from benchmarks.report import header, machine, write_output
from spotlab import SpotLab, SpotLabConfig, spot_lab

REPO = Path(__file__).resolve().parents[1]
READY_TARGET_S = 30.0
DRAIN_TARGET_S = 1.0
KILL_LATE_TARGET_S = 0.5
JOIN_TARGET_S = 10.0
MEASURES = {"ready_s": "start to ready", "drain_after_notice_s": "notice to the agent's drain",
            "kill_after_deadline_s": "deadline to the kill",
            "replacement_join_after_delay_s": "replace delay to replacement join"}
WARNING_S = 2.0
REPLACE_DELAY_S = 2.0
BUSY_LOOP = "while True: pass"


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


@contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """`count` processes that spin on a CPU each, stopped by their handles afterwards."""
    children = [procs.spawn([sys.executable, "-c", BUSY_LOOP]) for _ in range(count)]
    try:
        yield
    finally:
        for child in children:
            procs.stop(child, grace_s=2.0)


def wait_for_event(lab: SpotLab, matches: Any, timeout_s: float, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [event for event in lab.events() if matches(event)]
        if found:
            return found[0]
        time.sleep(0.1)
    raise TimeoutError(f"{what} not within {timeout_s:g} s")


def first_event(events: list[dict[str, Any]], kind: str, node: str) -> dict[str, Any]:
    for event in events:
        if event["event"] == kind and event["node"] == node:
            return event
    raise LookupError(f"the lab recorded no {kind} of {node}")


def one_repeat(config: SpotLabConfig, quiet: bool) -> dict[str, Any]:
    load_before = load_average()
    started = time.time()
    progress = (lambda message: None) if quiet else print
    with spot_lab(config, progress=progress) as lab:
        ready_s = time.time() - started
        joins = {e["node"]: e["start_to_join_s"] for e in lab.events() if e["event"] == "join"}
        lab.interrupt("spot-0")
        join = wait_for_event(lab, lambda e: e["event"] == "join" and e.get("replaces")
                              == "spot-0", config.warning_s + config.replace_delay_s + 300,
                              "the replacement's join")
        events = lab.events()
        stop_started = time.time()
    notice, drain, kill = (first_event(events, kind, "spot-0")
                           for kind in ("notice", "agent-drain", "kill"))
    return {
        "ready_s": round(ready_s, 3),
        "drain_after_notice_s": round(drain["t"] - notice["t"], 3),
        "kill_after_deadline_s": round(kill["t"] - notice["deadline"], 3),
        "node_start_to_join_s": joins,
        "replacement_join_after_delay_s": round(join["t"] - kill["t"] - config.replace_delay_s,
                                                3),
        "replacement_start_to_join_s": round(join["start_to_join_s"], 3),
        "stop_s": round(time.time() - stop_started, 3),
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }


def verdict(rows: list[dict[str, Any]], targets: dict[str, float]) -> dict[str, Any]:
    """Per measure: median, slowest, the target and whether the slowest repeat met it."""
    result = {}
    for key, target in targets.items():
        values = [row[key] for row in rows]
        result[key] = {"median": round(statistics.median(values), 3), "max": max(values),
                       "target": target, "met": max(values) <= target}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spotlab_start",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=4, help="spot worker nodes beside the head")
    parser.add_argument("--load", type=int, default=0,
                        help="busy processes beside the lab (a loaded machine)")
    parser.add_argument("--dashboard", action=argparse.BooleanOptionalAction, default=True,
                        help="the head's dashboard, as a run's lab has it")
    for flag, default, (key, what) in zip(
            ("--ready-target", "--drain-target", "--kill-late-target", "--join-target"),
            (READY_TARGET_S, DRAIN_TARGET_S, KILL_LATE_TARGET_S, JOIN_TARGET_S),
            MEASURES.items(), strict=True):
        parser.add_argument(flag, type=float, default=default, dest=key, metavar="SECONDS",
                            help=f"most seconds from {what} (default %(default)s)")
    parser.add_argument("--out", type=Path,
                        default=REPO / "results" / "benchmarks" /
                        f"spotlab_start-{time.strftime('%Y%m%d-%H%M%S')}.json",
                        help="the numbers go to this path with the suffix .json, the report "
                        "(how it was made: command, cores, load, date, commit) with .md")
    parser.add_argument("--quiet", action="store_true", help="no lab progress lines")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.nodes < 1 or args.load < 0:
        parser.error("--repeats and --nodes must be >= 1, --load >= 0")
    config = SpotLabConfig(spot=args.nodes, on_demand=0, cpus_per_node=1, alpha=1.0,
                           warning_s=WARNING_S, replace_delay_s=REPLACE_DELAY_S,
                           object_store_mb=80, dashboard=args.dashboard)
    rows = []
    with busy_processes(args.load):
        for repeat in range(1, args.repeats + 1):
            row = one_repeat(config, args.quiet)
            rows.append(row)
            print(f"repeat {repeat}: ready in {row['ready_s']:.1f} s, drained "
                  f"{row['drain_after_notice_s']:.2f} s after the notice, killed "
                  f"{row['kill_after_deadline_s']:.2f} s after the deadline, replacement "
                  f"joined {row['replacement_join_after_delay_s']:.1f} s after its replace delay, "
                  f"stopped in {row['stop_s']:.1f} s (load average {row['load_average_before']}"
                  f" -> {row['load_average_after']})", flush=True)
    measured = verdict(rows, {key: getattr(args, key) for key in MEASURES})
    made = machine()
    lines = [f"spot lab start (head + {args.nodes} nodes, {args.repeats} repeats, {args.load} "
             f"busy processes, {os.cpu_count()} CPUs):"]
    for key, what in MEASURES.items():
        row = measured[key]
        lines.append(f"  {what:<34} median {row['median']:6.2f} s, slowest {row['max']:6.2f} s, "
                     f"target <= {row['target']:g} s: {'met' if row['met'] else 'MISSED'}")
    print("\n".join(lines))
    numbers, report = args.out.with_suffix(".json"), args.out.with_suffix(".md")
    write_output(numbers, json.dumps({
        "made": made, "config": config.to_dict(), "nodes": args.nodes, "repeats": args.repeats,
        "busy_processes": args.load, "cpus": os.cpu_count(), "rows": rows, "verdict": measured,
    }, indent=2))
    write_output(report, "\n\n".join([header(made), "\n".join(lines)]) + "\n")
    print(f"numbers in {numbers}, report in {report}")
    return 0 if all(row["met"] for row in measured.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
