"""Inference cluster fairness benchmark, on one local spot lab: two and three jobs of
different cost per query under fair share and under first-come-first-served on the same
workers, then the failure run (two workers killed at the same moment, then the coordinator).

First, how fast every command answers while a job keeps the service busy: the service's own
answer (a command sent from a connected driver to the coordinator and back; worst of
--command-repeats) and the whole CLI as a user sees it (`invoke ...` in a fresh process:
Python, invoke, a Ray driver connection, the answer; worst of three). Then, per run, side by
side: the measured cost per query of each job (worker-seconds), the rate spread (max/min of
the jobs' query rates over the window, sampled every second after the first window while
every job runs: median and worst), samples where a job was starved (rate 0), total
throughput, and lost / duplicated / mismatched queries against the model's own answers.

    python -m benchmarks.inference_fairness [--quick] [--runs 1,5] [--json FILE]
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


RUN_NAMES = ("2 jobs fair", "2 jobs fcfs", "3 jobs fair", "3 jobs fcfs",
             "2 jobs fair, 2 workers + coordinator killed")


def runs(quick: bool) -> list[tuple[str, InferenceOptions]]:
    """Sub-jobs of 200 queries, so that a sub-job's fixed cost (a call, a part written to
    the store) does not hide the models' different costs per query."""
    timing = ({"rebalance_s": 1.0, "window_s": 10.0, "repeat": 150, "fail_after_s": 12.0}
              if quick else {"rebalance_s": 5.0, "window_s": 30.0, "repeat": 600,
                             "fail_after_s": 40.0})
    base = InferenceOptions(batch_size=200, **timing)  # type: ignore[arg-type]
    variants: list[dict[str, Any]] = [
        {}, {"policy": "fcfs"}, {"jobs": 3}, {"jobs": 3, "policy": "fcfs"},
        {"fail_workers": 2, "fail_coordinator": True}]
    return [(name, InferenceOptions(**{**base.parameters(), **change}))
            for name, change in zip(RUN_NAMES, variants, strict=True)]


def row(name: str, summary: dict[str, Any], seconds: float) -> dict[str, Any]:
    spread = summary["rate_spread_after_window"]
    checks = summary["exactly_once"]["jobs"].values()
    jobs = summary["jobs_final"]
    costs = {job: value["cost_per_query_s"] for job, value in jobs.items()}
    return {"run": name, "spread_median": spread["median"], "spread_max": spread["max"],
            "spread_samples": spread["samples"], "starved_samples": spread["starved"],
            "cost_ratio": (max(costs.values()) / min(costs.values())
                           if costs and all(costs.values()) else None),
            "throughput_qps": summary["throughput_qps"],
            "lost": sum(c["lost"] for c in checks),
            "duplicated": sum(c["duplicated"] for c in checks),
            "mismatched": sum(c["mismatched"] for c in checks),
            "reruns": sum(job["reruns"] for job in jobs.values()),
            "exactly_once": summary["exactly_once"]["ok"], "seconds": seconds}


COMMANDS: tuple[tuple[tuple[str, ...], int], ...] = (
    (("files-ls",), 0), (("members",), 0), (("job-status",), 0),
    (("job-status", "--name", "j"), 2),
    (("job-add", "j", "--model", "small_model", "--testset", "small_testset", "--labels",
      "small_label", "--batch-size", "5"), 0),
    (("job-start", "j"), 0), (("job-start", "j"), 2), (("job-status", "--name", "j"), 0),
    (("job-stop", "j"), 0), (("job-stop", "j"), 2), (("job-remove", "j"), 0),
    (("job-start", "ghost"), 2), (("files-get", "ghost", "/dev/null"), 2))
"""Each CLI command and its exit code: a refusal (unknown job, already running, ...) is an
answer too, and exits 2. The sequence leaves the service as it found it."""

SERVICE_CALLS: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("members", ()), ("job_status", ()),
    ("job_add", ("j", "small_model", "small_testset", "small_label", 5)),
    ("job_status", ("j",)), ("job_start", ("j",)), ("job_stop", ("j",)), ("job_remove", ("j",)),
    ("job_start", ("ghost",)))


def time_service(repeats: int) -> dict[str, float]:
    """Worst seconds each coordinator command took to answer a connected driver."""
    worst: dict[str, float] = {}
    for _ in range(repeats):
        for method, args in SERVICE_CALLS:
            began = time.monotonic()
            try:
                service.call(method, *args, timeout_s=10.0)
            except service.ServiceError as error:
                if "unknown job 'ghost'" not in str(error):
                    raise
            seconds = time.monotonic() - began
            key = method if not args else f"{method} {args[0]}"
            worst[key] = max(seconds, worst.get(key, 0.0))
    return worst


def time_cli(lab: Any, store: Path, scratch: Path) -> list[tuple[str, float, int, int]]:
    """(command, worst wall seconds of 3, exit code, expected exit code) of each CLI command
    in a fresh process, against the service on the lab."""
    state = scratch / "state"
    env = {**os.environ, STATE_DIR_ENV: str(state)}
    previous = os.environ.get(STATE_DIR_ENV)
    os.environ[STATE_DIR_ENV] = str(state)
    try:
        ServiceRecord(lab.ray_address, lab.driver_env, str(store), None, None,
                      time.time()).save()
    finally:
        if previous is None:
            del os.environ[STATE_DIR_ENV]
        else:
            os.environ[STATE_DIR_ENV] = previous
    worst: dict[int, tuple[str, float, int, int]] = {}
    for _ in range(3):
        for index, (command, expected) in enumerate(COMMANDS):
            began = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "invoke", *command], cwd=REPO,
                                  env=env, capture_output=True, text=True, check=False)
            seconds = time.monotonic() - began
            line = " ".join(command)
            if done.returncode != expected:
                print(f"{line}: exit {done.returncode}, expected {expected}: "
                      f"{done.stderr.strip()[-300:]}", file=sys.stderr, flush=True)
            code = done.returncode if index not in worst or worst[index][2] == expected \
                else worst[index][2]  # a wrong exit code is kept
            worst[index] = (line, max(seconds, worst.get(index, ("", 0.0))[1]), code, expected)
    return list(worst.values())


def time_commands(lab: Any, scratch: Path,
                  repeats: int) -> tuple[dict[str, float], list[tuple[str, float, int, int]]]:
    """Both timings against one service while a long job (18 000 sub-jobs of 5 queries)
    keeps its coordinator and workers busy."""
    store = scratch / "commands-store"
    bundle = make_bundle(("small",), repeat=200)
    (store / "files").mkdir(parents=True, exist_ok=True)
    for name, data in bundle.files.items():
        (store / "files" / name).write_bytes(data)
    service.start_coordinator({"store": str(store), "workers": 3})
    try:
        service.call("job_add", "busy", "small_model", "small_testset", "small_label", 5)
        service.call("job_start", "busy")
        answers = time_service(repeats)
        cli = time_cli(lab, store, scratch)
    finally:
        service.stop_coordinator()
    return answers, cli


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.inference_fairness",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="10 s window, 1 s rebalance, shorter jobs")
    parser.add_argument("--runs", default="1,2,3,4,5",
                        help="which runs, by number: " + "; ".join(
                            f"{i} {name}" for i, name in enumerate(RUN_NAMES, 1)))
    parser.add_argument("--command-repeats", type=int, default=20,
                        help="times each command is sent to the service (0: skip the "
                        "command timings)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    try:
        chosen = sorted({int(n) for n in args.runs.split(",") if n.strip()})
        if not chosen or not all(1 <= n <= len(RUN_NAMES) for n in chosen):
            raise ValueError
    except ValueError:
        parser.error(f"--runs: expected numbers 1..{len(RUN_NAMES)} separated by commas, "
                     f"got {args.runs!r}")
    rows: list[dict[str, Any]] = []
    answers: dict[str, float] = {}
    cli: list[tuple[str, float, int, int]] = []
    with tempfile.TemporaryDirectory(prefix="inference-bench-") as scratch, \
            spot_lab(LAB) as lab, connected(lab.ray_address, lab.driver_env):
        if args.command_repeats > 0:
            answers, cli = time_commands(lab, Path(scratch), args.command_repeats)
            print(f"service answer | worst of {args.command_repeats} (s)")
            for method, seconds in answers.items():
                print(f"{method} | {seconds:.3f}")
            print("command (fresh process) | worst of 3 (s) | exit code | expected")
            for command, seconds, code, expected in cli:
                print(f"{command} | {seconds:.2f} | {code} | {expected}", flush=True)
        for index, (name, options) in enumerate(runs(args.quick), 1):
            if index not in chosen:
                continue
            print(f"--- {name}", file=sys.stderr, flush=True)
            options = InferenceOptions(**{**options.parameters(),
                                          "out": f"{scratch}/run{index}"})
            began = time.time()
            summary = run_experiment(options, lambda line: print(line, file=sys.stderr,
                                                                 flush=True))
            rows.append(row(name, summary, time.time() - began))
    columns = list(rows[0]) if rows else []
    print(" | ".join(columns))
    for entry in rows:
        print(" | ".join(fmt(entry[column]) for column in columns))
    if answers:
        print(f"worst service answer {max(answers.values()):.3f} s; worst CLI command "
              f"{max(seconds for _, seconds, _, _ in cli):.2f} s")
    if args.json:
        args.json.write_text(json.dumps({"service_answers_s": answers, "commands": cli,
                                         "runs": rows}, indent=2))
    wrong_codes = [line for line, _, code, expected in cli if code != expected]
    return 0 if all(r["exactly_once"] for r in rows) and not wrong_codes else 1


if __name__ == "__main__":
    sys.exit(main())
