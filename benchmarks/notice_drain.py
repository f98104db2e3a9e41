"""How soon after a spot notice Ray drains the node: the notice agent's delay, measured.

Brings a spot lab up (a head, --nodes spot nodes, each busy with a task that is retried
forever), interrupts a spot node at each time of an explicit schedule (--preemptions
at:...), and measures per notice: the seconds from the notice on the node's endpoint to the
GCS accepting its agent's drain (reason PREEMPTION, the notice's deadline), and to the
supervisor first reading the node in Ray's draining table. Prints min, median and max of
each with the load average, writes the numbers to --out (JSON) and exits 1 when the slowest
drain misses the target (1 s) or fewer than --preemptions notices were measured.

--load N runs N busy processes beside the lab meanwhile (a loaded machine).

    python -m benchmarks.notice_drain [--preemptions 12] [--every 10] [--nodes 4] [--load 0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import procs
from benchmarks.report import write_output
from benchmarks.spotlab_start import busy_processes, load_average
from spotlab import SpotLab, SpotLabConfig, spot_lab
from spotlab.report import preemptions

REPO = Path(__file__).resolve().parents[1]
DRAIN_TARGET_S = 1.0
FIRST_AT_S = 5.0
BUSY_DRIVER = """
import ray, sys, time
ray.init(log_to_driver=False)

@ray.remote(num_cpus=1, resources={"spot": 1}, max_retries=-1)
def occupy():
    while True:
        time.sleep(1)

refs = [occupy.remote() for _ in range(int(sys.argv[1]))]
print("busy", flush=True)
ray.get(refs)
"""


def measure(config: SpotLabConfig, wanted: int, quiet: bool) -> tuple[list[dict[str, Any]],
                                                                      list[float]]:
    """The lab's preemption rows once `wanted` notices were killed, and load samples."""
    loads = [load_average()]
    progress = (lambda message: None) if quiet else print
    with spot_lab(config, progress=progress) as lab:
        driver = procs.spawn([sys.executable, "-c", BUSY_DRIVER, str(config.spot)],
                             env=lab.driver_env, cwd=REPO)
        try:
            procs.wait_for_line(driver, "busy", timeout_s=120, name="the busy driver")
            rows = _until_killed(lab, wanted, config, loads, quiet)
        finally:
            procs.stop(driver)
    return rows, loads


def _until_killed(lab: SpotLab, wanted: int, config: SpotLabConfig, loads: list[float],
                  quiet: bool) -> list[dict[str, Any]]:
    deadline = time.monotonic() + FIRST_AT_S + wanted * 60.0 + 300.0
    reported = 0
    while time.monotonic() < deadline:
        events = lab.events()
        killed = [e for e in events if e["event"] == "kill"]
        missed = [e for e in events if e["event"] == "interruption-missed"]
        if len(killed) > reported:
            reported = len(killed)
            loads.append(load_average())
            if not quiet:
                print(f"{reported} of {wanted} notices done ({len(missed)} points found no "
                      f"running spot node), load average {loads[-1]}", flush=True)
        if len(killed) + len(missed) >= wanted:
            return preemptions(events)
        time.sleep(0.5)
    raise TimeoutError(f"{wanted} notices not done within the schedule and 300 s")


def summary(values: list[float]) -> dict[str, float | int]:
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3),
            "max": round(max(values), 3), "n": len(values)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.notice_drain",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--preemptions", type=int, default=12, help="notices to measure")
    parser.add_argument("--every", type=float, default=10.0,
                        help="seconds between the schedule's interruptions")
    parser.add_argument("--nodes", type=int, default=4, help="spot nodes beside the head")
    parser.add_argument("--load", type=int, default=0,
                        help="busy processes beside the lab (a loaded machine)")
    parser.add_argument("--target", type=float, default=DRAIN_TARGET_S,
                        help="seconds from a notice to its agent's drain, at most")
    parser.add_argument("--out", type=Path,
                        default=REPO / "results" / "benchmarks" /
                        f"notice_drain-{time.strftime('%Y%m%d-%H%M%S')}.json")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    if args.preemptions < 1 or args.nodes < 1 or args.load < 0 or args.every <= 0:
        parser.error("--preemptions and --nodes must be >= 1, --load >= 0, --every > 0")
    times = [FIRST_AT_S + k * args.every for k in range(args.preemptions)]
    config = SpotLabConfig(spot=args.nodes, on_demand=0, cpus_per_node=1,
                           preemptions="at:" + ",".join(f"{t:g}" for t in times),
                           replace_delay_s=3.0, object_store_mb=80, dashboard=False)
    with busy_processes(args.load):
        rows, loads = measure(config, args.preemptions, args.quiet)
    agent = [row["to_agent_drain_s"] for row in rows if row["to_agent_drain_s"] is not None]
    listed = [row["to_draining_s"] for row in rows if row["to_draining_s"] is not None]
    measured = {"notice_to_agent_drain_s": summary(agent) if agent else None,
                "notice_to_ray_lists_draining_s": summary(listed) if listed else None}
    met = bool(agent) and len(agent) >= args.preemptions and max(agent) <= args.target \
        and len(agent) == len(rows)
    print(f"notice -> drain on a spot lab ({args.nodes} busy spot nodes, {len(rows)} notices, "
          f"{args.load} busy processes, {os.cpu_count()} CPUs, load average "
          f"{min(loads):.2f}-{max(loads):.2f}):")
    for key, what in (("notice_to_agent_drain_s", "the agent's drain accepted"),
                      ("notice_to_ray_lists_draining_s", "Ray lists the node draining")):
        row = measured[key]
        if row is not None:
            print(f"  {what:<30} min {row['min']:.3f} s, median {row['median']:.3f} s, "
                  f"max {row['max']:.3f} s (n = {row['n']})")
    print(f"  target: every notice drained by its agent within {args.target:g} s: "
          f"{'met' if met else 'MISSED'}")
    write_output(args.out, json.dumps({
        "config": config.to_dict(), "busy_processes": args.load, "cpus": os.cpu_count(),
        "load_average": loads, "rows": rows, "measured": measured, "target_s": args.target,
        "met": met}, indent=2))
    print(f"numbers in {args.out}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
