"""Inference speed against the physical limit: per demo model and batch size, the service's
queries/s per worker beside ONNX Runtime's own queries/s in one process on one core for the
same model, batch and inputs, measured side by side in one run, and where the difference goes.

The service runs on a local spot lab with one worker (one CPU); one job per model and batch
size answers the whole test set; its rate counts from its first sub-job's answer to its last
(the first sub-job loads the model and the test set). ONNX Runtime alone runs the same model
in a process of its own (one thread, the same batches of the same stored rows, converted as a
worker converts them) right before and right after each job, three rounds each; the best
round is the limit (a busy machine only slows a round down). Where the service's time goes,
from the parts its worker wrote: `in model` (the ONNX Runtime call in the worker, also shown
per query), `in worker` (the rest of a sub-job inside the worker: slicing the test set, the
answers as a list), `around` (the rest of the wall time: the part written to the store, Ray
between two sub-jobs, and the coordinator's dispatch, claim and the answer back whenever
they outlast the sub-job the worker runs, for it holds the next one while one runs).

Targets: the costlier demo model costs ONNX Runtime ≥ 0.1 ms a query on one core and ≥ 10×
the small one, and at every batch size the service reaches ≥ 0.8× of ONNX Runtime alone on
it; the exit code is 1
when any is missed.

    python -m benchmarks.inference_speed [--batch-sizes 100,1000] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.report import Target, exit_code, header, machine, targets_text, write_output
from launch.inference import LAB_COMMAND_HOST, connected
from spotlab import SpotLabConfig, spot_lab
from workloads.common.storage import open_storage
from workloads.inference import service
from workloads.inference.models import OnnxModel, array_from_bytes, make_bundle

LAB = SpotLabConfig(spot=1, on_demand=1, cpus_per_node=1, alpha=1.0, dashboard=False)
"""One spot node of one CPU (the one worker), an on-demand node for the coordinator."""
REPEATS = {"small": 200, "large": 40}
"""The held-out digits (450) repeated: seconds of work per job at every batch size."""
COSTLY_MODEL = "large"
RATIO_TARGET = 0.8
COST_TARGET_MS = 0.1
COST_RATIO_TARGET = 10.0
"""The demo's two models differ this much in cost per query, at least."""
JOB_TIMEOUT_S = 600.0
ORT_ROUNDS = 3


def ort_alone(model: OnnxModel, queries: np.ndarray, batch_size: int,
              rounds: int = ORT_ROUNDS) -> float:
    """Queries/s of ONNX Runtime in this process on one thread over every batch of
    `queries`: the best of `rounds` (the machine's other work only ever slows a round)."""
    best = 0.0
    model.predict(queries[:batch_size])  # ONNX Runtime's first call sets itself up
    for _ in range(rounds):
        began = time.perf_counter()
        for first in range(0, len(queries), batch_size):
            model.predict(queries[first:first + batch_size])
        best = max(best, len(queries) / (time.perf_counter() - began))
    return best


def ort_alone_process(model: Path, testset: Path, batch_size: int) -> float:
    """`ort_alone` in a process of its own session, as each of the lab's nodes is: where the
    kernel groups a session's processes for CPU time (autogroup), a measurement in the
    driver's session would share its group and not be like for like."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.inference_speed", "--alone",
                           str(model), str(testset), str(batch_size)], capture_output=True,
                          text=True, timeout=JOB_TIMEOUT_S, start_new_session=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ONNX Runtime alone failed: {done.stderr.strip()[-500:]}")
    return float(done.stdout.split()[-1])


def service_run(store: Any, name: str, size: str, batch_size: int) -> dict[str, float]:
    """One job over the whole test set on the service's one worker: its rate from the first
    sub-job's answer to the last, and the parts' time in the model and in the worker."""
    service.call("job_add", name, f"{size}_model", f"{size}_testset", f"{size}_label",
                 batch_size)
    run_id = service.call("job_start", name)["run_id"]
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while service.call("job_status", name)["jobs"][name]["state"] == "running":
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {name} not done in {JOB_TIMEOUT_S:g} s")
        time.sleep(0.5)
    state = service.call("job_status", name)["jobs"][name]
    if state["state"] != "done":
        raise RuntimeError(f"job {name}: {state['state']}: {state['error']}")
    parts = sorted((json.loads(store.read_bytes(f"jobs/{run_id}/parts/{part}"))
                    for part in open_storage(f"{store.uri}/jobs/{run_id}/parts").names()),
                   key=lambda part: part["finished_at"])
    later = parts[1:]  # the first sub-job loaded the files: counted from its answer on
    wall = parts[-1]["finished_at"] - parts[0]["finished_at"]
    answered = sum(len(part["ids"]) for part in later)
    compute = sum(part["compute_s"] for part in later)
    busy = sum(part["busy_s"] for part in later)
    service.call("job_remove", name)
    return {"service_qps": answered / wall, "in_model": compute / wall,
            "in_worker": (busy - compute) / wall, "around": 1.0 - busy / wall,
            "worker_ms_per_query": 1000.0 * compute / answered}


def measure(batch_sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="inference-speed-") as scratch, \
            spot_lab(LAB) as lab, connected(lab.ray_address, lab.driver_env):
        store = open_storage(f"{scratch}/store")
        queries: dict[str, int] = {}
        for size, repeat in REPEATS.items():
            bundle = make_bundle((size,), repeat)
            for name, data in bundle.files.items():
                store.write_bytes(f"files/{name}", data)
            queries[size] = len(array_from_bytes(bundle.files[f"{size}_testset"], "testset"))
        service.start_coordinator({"store": store.uri, "workers": 1,
                                   "command_token": secrets.token_urlsafe(16),
                                   "command_host": LAB_COMMAND_HOST,
                                   "subjob_timeout_s": 300.0})
        del lab  # the service runs on it until the block ends
        try:
            for size in REPEATS:
                for batch_size in batch_sizes:
                    print(f"--- {size} model, batch {batch_size}", file=sys.stderr, flush=True)
                    model, testset = (Path(scratch, "store", "files", f"{size}_{kind}")
                                      for kind in ("model", "testset"))
                    before = ort_alone_process(model, testset, batch_size)
                    served = service_run(store, f"{size}-{batch_size}", size, batch_size)
                    after = ort_alone_process(model, testset, batch_size)
                    alone = max(before, after)
                    rows.append({"model": size, "batch": batch_size, "queries":
                                 queries[size], "ort_qps": alone,
                                 "ort_ms_per_query": 1000.0 / alone,
                                 **served, "ratio": served["service_qps"] / alone})
        finally:
            service.stop_coordinator()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| model | batch | queries | ONNX Runtime alone (q/s, 1 core) | ms/query | "
             "service per worker (q/s) | ratio | in model | in worker | around | "
             "worker's model ms/query |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(
            f"| {row['model']} | {row['batch']} | {row['queries']} | {row['ort_qps']:,.0f} | "
            f"{row['ort_ms_per_query']:.4f} | {row['service_qps']:,.0f} | "
            f"{row['ratio']:.2f} | {100 * row['in_model']:.0f} % | "
            f"{100 * row['in_worker']:.0f} % | {100 * row['around']:.0f} % | "
            f"{row['worker_ms_per_query']:.4f} |")
    return "\n".join(lines)


def targets(rows: list[dict[str, Any]]) -> list[Target]:
    costly = [row for row in rows if row["model"] == COSTLY_MODEL]
    found = [Target(f"{COSTLY_MODEL} model: ONNX Runtime ms per query on one core "
                    f"(batch {row['batch']})", row["ort_ms_per_query"], COST_TARGET_MS,
                    at_most=False) for row in costly]
    cheap = {row["batch"]: row for row in rows if row["model"] != COSTLY_MODEL}
    found += [Target(f"{COSTLY_MODEL} / small model: ONNX Runtime cost per query (batch "
                     f"{row['batch']})", row["ort_ms_per_query"] /
                     cheap[row["batch"]]["ort_ms_per_query"], COST_RATIO_TARGET,
                     at_most=False) for row in costly if row["batch"] in cheap]
    found += [Target(f"{COSTLY_MODEL} model, batch {row['batch']}: service per worker / "
                     "ONNX Runtime alone", row["ratio"], RATIO_TARGET, at_most=False)
              for row in costly]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.inference_speed",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", default="100,1000",
                        help="queries per sub-job (and per ONNX Runtime call), comma-separated")
    parser.add_argument("--out", type=Path, help="also write the report (markdown) here")
    parser.add_argument("--alone", nargs=3, metavar=("MODEL", "TESTSET", "BATCH"),
                        help="only ONNX Runtime alone on these files: its queries/s")
    args = parser.parse_args(argv)
    if args.alone:
        model, testset, batch = args.alone
        print(ort_alone(OnnxModel(Path(model).read_bytes(), "model", threads=1),
                        array_from_bytes(Path(testset).read_bytes(), "testset"), int(batch)))
        return 0
    try:
        batch_sizes = [int(word) for word in args.batch_sizes.split(",") if word.strip()]
        if not batch_sizes or min(batch_sizes) < 1:
            raise ValueError
    except ValueError:
        parser.error(f"--batch-sizes: expected positive integers separated by commas, got "
                     f"{args.batch_sizes!r}")
    rows = measure(batch_sizes)
    found = targets(rows)
    report = "\n\n".join([header(machine()), table(rows),
                          "in model: in the ONNX Runtime call in the worker; in worker: the "
                          "rest of a sub-job in the worker; around: part written, Ray between "
                          "sub-jobs, dispatch and answer back when they outlast a sub-job "
                          "(fractions of the service's wall time)",
                          targets_text(found)])
    print(report)
    if args.out:
        write_output(args.out, report + "\n")
    return exit_code(found)


if __name__ == "__main__":
    sys.exit(main())
