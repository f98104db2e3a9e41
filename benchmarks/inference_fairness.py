"""Inference cluster fairness benchmark, on one local spot lab: two and three jobs of
different cost per query under fair share and under first-come-first-served on the same
workers, then the failure run (two workers killed at the same moment, then the coordinator).

First, every command's wall time as a user sees it (`invoke ...` in a fresh process: Python,
invoke, a Ray driver connection, the coordinator's answer), worst of three. Then, per run,
side by side: the rate spread (max/min of the jobs' query rates over the
window, sampled every second after the first window while every job runs: median and
worst), samples where a job was starved (rate 0), total throughput, and lost / duplicated /
mismatched queries against the model's own answers.

    python -m benchmarks.inference_fairness [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from launch.inference import STATE_DIR_ENV, ServiceRecord, connected
from spotlab import SpotLabConfig, spot_lab
from workloads.inference import service
from workloads.inference.experiment import run_experiment
from workloads.inference.models import make_bundle
from workloads.inference.options import InferenceOptions

REPO = Path(__file__).resolve().parents[1]
LAB = SpotLabConfig(spot=2, on_demand=1, cpus_per_node=2, alpha=1.0, dashboard=False)


def runs(quick: bool) -> list[tuple[str, InferenceOptions]]:
    timing = ({"rebalance_s": 1.0, "window_s": 10.0, "repeat": 60, "fail_after_s": 15.0}
              if quick else {"rebalance_s": 5.0, "window_s": 30.0, "repeat": 200,
                             "fail_after_s": 45.0})
    base = InferenceOptions(**timing)  # type: ignore[arg-type]
    return [
        ("2 jobs fair", base),
        ("2 jobs fcfs", InferenceOptions(**{**base.parameters(), "policy": "fcfs"})),
        ("3 jobs fair", InferenceOptions(**{**base.parameters(), "jobs": 3})),
        ("3 jobs fcfs", InferenceOptions(**{**base.parameters(), "jobs": 3,
                                             "policy": "fcfs"})),
        ("2 jobs fair, 2 workers + coordinator killed",
         InferenceOptions(**{**base.parameters(), "fail_workers": 2,
                             "fail_coordinator": True})),
    ]


def row(name: str, summary: dict[str, Any], seconds: float) -> dict[str, Any]:
    spread = summary["rate_spread_after_window"]
    checks = summary["exactly_once"]["jobs"].values()
    return {"run": name, "spread_median": spread["median"], "spread_max": spread["max"],
            "spread_samples": spread["samples"], "starved_samples": spread["starved"],
            "throughput_qps": summary["throughput_qps"],
            "lost": sum(c["lost"] for c in checks),
            "duplicated": sum(c["duplicated"] for c in checks),
            "mismatched": sum(c["mismatched"] for c in checks),
            "exactly_once": summary["exactly_once"]["ok"], "seconds": seconds}


COMMANDS = (("files-ls",), ("members",), ("job-status",), ("job-status", "small"),
            ("job-add", "small", "--model", "small_model", "--testset", "small_testset",
             "--labels", "small_label"),
            ("job-start", "small"), ("job-stop", "small"), ("job-start", "small"),
            ("job-stop", "small"), ("job-remove", "small"), ("job-start", "ghost"),
            ("files-get", "ghost", "/dev/null"))


def time_commands(lab: Any, scratch: Path) -> list[tuple[str, float, int]]:
    """(command, worst wall seconds of 3, exit code) of each CLI command against a service
    on the lab (the refusals exit 2 by design)."""
    store = scratch / "commands-store"
    bundle = make_bundle(("small",), repeat=50)
    for name, data in bundle.files.items():
        (store / "files").mkdir(parents=True, exist_ok=True)
        (store / "files" / name).write_bytes(data)
    service.start_coordinator({"store": str(store), "workers": 2})
    env = {**os.environ, STATE_DIR_ENV: str(scratch / "state")}
    previous = os.environ.get(STATE_DIR_ENV)
    os.environ[STATE_DIR_ENV] = env[STATE_DIR_ENV]
    ServiceRecord(lab.ray_address, lab.driver_env, str(store), None, None, time.time()).save()
    if previous is None:
        del os.environ[STATE_DIR_ENV]
    timings = []
    try:
        for _ in range(3):
            for command in COMMANDS:
                began = time.monotonic()
                done = subprocess.run([sys.executable, "-m", "invoke", *command], cwd=REPO,
                                      env=env, capture_output=True, text=True, check=False)
                timings.append((" ".join(command), time.monotonic() - began, done.returncode))
    finally:
        service.stop_coordinator()
    worst: dict[str, tuple[float, int]] = {}
    for line, seconds, code in timings:
        worst[line] = (max(seconds, worst.get(line, (0.0, 0))[0]), code)
    return [(line, seconds, code) for line, (seconds, code) in worst.items()]


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.inference_fairness",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="10 s window, 1 s rebalance, shorter jobs (minutes, not ten)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="inference-bench-") as scratch, \
            spot_lab(LAB) as lab, connected(lab.ray_address, lab.driver_env):
        commands = time_commands(lab, Path(scratch))
        print("command | worst of 3 (s) | exit code")
        for command, seconds, code in commands:
            print(f"{command} | {seconds:.2f} | {code}", flush=True)
        for index, (name, options) in enumerate(runs(args.quick)):
            print(f"--- {name}", file=sys.stderr, flush=True)
            options = InferenceOptions(**{**options.parameters(),
                                          "out": f"{scratch}/run{index}"})
            began = time.time()
            summary = run_experiment(options, lambda line: print(line, file=sys.stderr,
                                                                 flush=True))
            rows.append(row(name, summary, time.time() - began))
    columns = list(rows[0])
    print(" | ".join(columns))
    for entry in rows:
        print(" | ".join(fmt(entry[column]) for column in columns))
    if args.json:
        args.json.write_text(json.dumps({"commands": commands, "runs": rows}, indent=2))
    return 0 if all(r["exactly_once"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
