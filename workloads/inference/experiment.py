"""The experiment in one run (`python -m workloads.inference`, a driver on the service's Ray
cluster): the service up, models, test sets and labels into its store, two or three jobs of
different cost started together, the failures injected when asked, a status sample every
second until every job is done, the exactly-once check, the results folder, the service down.

The exactly-once check counts from what the service delivered: each job's merged output
lists (query id, answer) pairs; checked against the oracle (the labels: one per query id),
ids never answered are lost and ids answered more than once duplicated, beside what the
service itself reports (sub-jobs re-run after a failure, late answers it discarded).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import ray
from ray.exceptions import RayActorError

from workloads.common.provenance import provenance
from workloads.common.results import ResultsWriter
from workloads.common.storage import Storage, open_storage
from workloads.inference import service
from workloads.inference.coordinator import NAMESPACE, RUNS_FOLDER, parse_rerun_key
from workloads.inference.files import store_file
from workloads.inference.models import OnnxModel, array_from_bytes, make_bundle
from workloads.inference.options import InferenceOptions
from workloads.inference.service import ServiceError, call
from workloads.inference.stats import delivery, recovery, spread

COSTS = ("small", "medium", "large")
SAMPLE_EVERY_S = 1.0
SPREAD_MIN_SUB_JOBS = 20
FAIR_TOLERANCE = 1.05
RUN_TIMEOUT_S = 3600.0
HOLD_TIMEOUT_S = 30.0
LATENCY_SAMPLE = 2000


def job_sizes(jobs: int) -> dict[str, str]:
    """Each job's name and the demo model it serves: two jobs the small network and the
    convolutional one (the costliest), three all three models, more the three in turn (the
    fourth job `small-2`, and so on: copies of the same models, in jobs of their own)."""
    if jobs == 2:
        return {"small": "small", "large": "large"}
    sizes = [COSTS[index % len(COSTS)] for index in range(jobs)]
    return {(size if index < len(COSTS) else f"{size}-{index // len(COSTS) + 1}"): size
            for index, size in enumerate(sizes)}


def run_experiment(options: InferenceOptions, show: Callable[[str], None]) -> dict[str, Any]:
    writer = ResultsWriter("inference", options.out, options.s3_endpoint)
    store_uri = options.store or f"{writer.location.rstrip('/')}/store"
    store_endpoint = options.store_endpoint or (None if options.store else options.s3_endpoint)
    if "://" not in store_uri:
        store_uri = str(Path(store_uri).resolve())  # the same folder from every node
    store = open_storage(store_uri, store_endpoint)
    jobs = job_sizes(options.jobs)
    sizes = tuple(dict.fromkeys(jobs.values()))
    show(f"building the {', '.join(sizes)} models on the digits ...")
    bundle = make_bundle(sizes, options.repeat, options.seed)
    for name, data in bundle.files.items():
        store.write_bytes(store_file(name), data)
    service.start_on_this_cluster({**options.settings(store_uri),
                                   "s3_endpoint": store_endpoint})
    show(f"service up: {options.workers} workers, policy {options.policy}, store {store_uri}")
    try:
        for name, size in jobs.items():
            call("job_add", name, f"{size}_model", f"{size}_testset", f"{size}_label",
                 options.batch_size)
        began = time.time()
        for name in jobs:
            call("job_start", name)
        cpu_before = call("members")["coordinator"]
        samples, failures = _watch(options, began, show)
        status = call("job_status")
        final = status["jobs"]
        cpu_after = call("members")["coordinator"]
    finally:
        service.stop_coordinator()
    failures = with_reruns(store_uri, store_endpoint, final, failures)
    summary = _summary(options, store, final, samples, failures, began, jobs)
    summary["coordinator_incarnations"] = status["coordinator_incarnation"]
    summary["coordinator_cpu"] = coordinator_cpu(cpu_before, cpu_after, final)
    latencies = [{"job": name, "latency_ms": 1000.0 * value} for name in jobs
                 for value in _sample(_latencies(store_uri, store_endpoint,
                                                 final[name]["run_id"]))]
    writer.add_records("rates", samples)
    writer.add_records("latencies", latencies)
    writer.add_records("failures", failures)
    writer.finish(summary, provenance(options.parameters(), {}, options.target,
                                      {"seed": options.seed}), to_log=options.results_to_log)
    return summary


def _watch(options: InferenceOptions, began: float,
           show: Callable[[str], None]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    samples: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    failed = not (options.fail_workers or options.fail_coordinator)
    running_since = time.time()
    while time.time() - began < RUN_TIMEOUT_S:
        time.sleep(SAMPLE_EVERY_S)
        try:
            jobs = call("job_status", timeout_s=2.0)["jobs"]
        except ServiceError as error:  # the coordinator restarting
            show(f"status: {error}")
            continue
        now = time.time() - began
        for name, job in jobs.items():
            samples.append({"t": now, "job": name, "rate": job["query_rate"],
                            "processed": job["processed"], "state": job["state"],
                            "share": job["share"], "assigned": len(job["assigned_workers"])})
        show(f"t={now:5.0f} s " + progress_line(jobs))
        if all(job["state"] in ("done", "failed") for job in jobs.values()):
            break
        if not all(job["state"] == "running" for job in jobs.values()):
            running_since = time.time()
        if not failed and now >= options.fail_after_s and time.time() - running_since > 1:
            failures = _inject(options, now, show)
            failed = bool(failures)
    return samples, failures


def progress_line(jobs: dict[str, Any]) -> str:
    """Every job's state, progress and rate; past three jobs, the counts and the spread."""
    if len(jobs) <= len(COSTS):
        return "  ".join(f"{name} {job['state']} {100 * job['progress']:5.1f} % "
                         f"{job['query_rate']:7.1f} q/s" for name, job in jobs.items())
    states = {state: sum(1 for job in jobs.values() if job["state"] == state)
              for state in ("running", "done", "failed", "idle")}
    rates = sorted(job["query_rate"] for job in jobs.values() if job["state"] == "running")
    shown = (f"; rates {rates[0]:.1f} / {rates[len(rates) // 2]:.1f} / {rates[-1]:.1f} q/s "
             "(min / median / max)" if rates else "")
    return f"{len(jobs)} jobs: " + ", ".join(f"{count} {state}" for state, count
                                             in states.items() if count) + shown


def _inject(options: InferenceOptions, now: float,
            show: Callable[[str], None]) -> list[dict[str, Any]]:
    """Kill busy workers at the same moment, each stopped in the middle of a sub-job first
    (`holding`), then the coordinator (Ray restarts it; it resumes from the store). Nothing
    while fewer workers than asked are busy (the next sample tries again)."""
    events: list[dict[str, Any]] = []
    busy = [w for w in call("members")["workers"] if w["state"] == "busy"]
    if len(busy) < options.fail_workers:
        return []
    victims = [ray.get_actor(w["name"], namespace=NAMESPACE)
               for w in busy[:options.fail_workers]]
    asked: list[Any] = [victim.hold_mid_sub_job.remote(HOLD_TIMEOUT_S) for victim in victims]
    for worker, handle, hold in zip(busy, victims, asked, strict=False):
        try:
            holding = cast(dict[str, Any] | None, ray.get(hold))
        except RayActorError:  # gone meanwhile (its spot node, say): killed all the same
            holding = None
        ray.kill(handle, no_restart=True)
        events.append({"t": now, "killed": worker["name"], "holding": holding})
    if options.fail_coordinator:
        ray.kill(service.coordinator(), no_restart=False)
        events.append({"t": now, "killed": "coordinator"})
    show(f"t={now:5.0f} s killed {', '.join(str(e['killed']) for e in events)}")
    return events


def with_reruns(store_uri: str, endpoint: str | None, final: dict[str, Any],
                failures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each killed worker's event with its `holding` named by job, and the sub-jobs that ran
    again because it died holding them (`reran`) as the coordinator recorded them in the
    store (`jobs/<run id>/reruns/`): the worker's word and the service's record side by side."""
    reran: dict[str, list[dict[str, Any]]] = {}
    job_of_run = {job["run_id"]: name for name, job in final.items()}
    for name, job in final.items():
        folder = open_storage(f"{store_uri.rstrip('/')}/{RUNS_FOLDER}/{job['run_id']}/reruns",
                              endpoint)
        for parsed in filter(None, map(parse_rerun_key, folder.names())):
            reran.setdefault(parsed[1], []).append({"job": name, "sub_job": parsed[0]})
    named: list[dict[str, Any]] = []
    for event in failures:
        if event["killed"] != "coordinator":
            holding = event.get("holding")
            if holding is not None:
                holding = {"job": job_of_run.get(holding["run_id"]), **holding}
            event = {**event, "holding": holding, "reran": reran.get(event["killed"], [])}
        named.append(event)
    return named


def _latencies(store_uri: str, endpoint: str | None, run_id: str) -> list[float]:
    parts = open_storage(f"{store_uri.rstrip('/')}/jobs/{run_id}/parts", endpoint)
    values: list[float] = []
    for name in parts.names():
        values.extend(json.loads(parts.read_bytes(name))["latencies_s"])
    return values


def _sample(values: list[float], at_most: int = LATENCY_SAMPLE) -> list[float]:
    """Evenly spaced order statistics: the CDF's shape, in a results line of bounded size."""
    if len(values) <= at_most:
        return sorted(values)
    ordered = np.sort(values)
    return [float(v) for v in ordered[np.linspace(0, len(ordered) - 1, at_most).astype(int)]]


def exactly_once(store: Storage, job: dict[str, Any], size: str) -> dict[str, Any]:
    """Every query answered exactly once: the merged output's (query id, answer) pairs
    against the oracle (the labels, one per query id) and the model's own answer to each
    query, computed again here; beside them what the service reports it re-ran and
    discarded."""
    output = json.loads(store.read_bytes(f"jobs/{job['run_id']}/output.json"))
    model = OnnxModel(store.read_bytes(store_file(f"{size}_model")), f"{size}_model")
    queries = array_from_bytes(store.read_bytes(store_file(f"{size}_testset")), "testset")
    labels = array_from_bytes(store.read_bytes(store_file(f"{size}_label")), "labels")
    # test sets repeat their rows: each distinct one computed once
    distinct, which = np.unique(queries.reshape(len(queries), -1), axis=0, return_inverse=True)
    answers = model.predict(distinct.reshape(-1, *queries.shape[1:]))
    expected = [int(answers[index]) for index in which.reshape(-1)]
    counted = delivery(output["ids"], output["predictions"], [int(v) for v in labels],
                       expected)
    return {**counted, "accuracy": counted["correct"] / max(counted["answered"], 1),
            "reruns": job["reruns"], "duplicates_discarded": job["duplicates_discarded"],
            "ok": counted["answered"] == counted["queries"] and not any(
                counted[key] for key in ("lost", "duplicated", "unknown", "mismatched"))}


def failure_recovery(samples: list[dict[str, Any]],
                     failures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The total query rate (answers per second over the last 5 s of samples) around each
    failure moment: its dip and the seconds until it is back within 5 % of its level."""
    totals: dict[float, int] = {}
    for row in samples:
        totals[row["t"]] = totals.get(row["t"], 0) + row["processed"]
    times = sorted(totals)
    rates, used = [], []
    for index, t in enumerate(times):
        earlier = [u for u in times[:index] if t - u >= 5.0]
        if earlier:
            used.append(t)
            rates.append((totals[t] - totals[earlier[-1]]) / (t - earlier[-1]))
    moments = sorted({event["t"] for event in failures})
    return [{"t": at, **recovery(used, rates, at)} for at in moments]


def rate_spread(samples: list[dict[str, Any]], options: InferenceOptions) -> dict[str, Any]:
    """max/min of the running jobs' query rates per sample, after the first window: median
    and worst, with the samples left out because a job answered nothing (`starved`) or too
    few sub-jobs for its rate to be known within 5 % (`thin`)."""
    spreads = []
    starved = thin = 0
    # a rate counts whole sub-jobs: from fewer than this many in the window its error is
    # above 5 %, and the max/min of two such rates (a stall: a failure, a spot node gone)
    # measures the rounding, not the sharing
    fewest = SPREAD_MIN_SUB_JOBS * options.batch_size / options.window_s
    for t in sorted({row["t"] for row in samples}):
        rows = [row for row in samples if row["t"] == t]
        if t >= options.window_s and len(rows) == options.jobs and all(
                row["state"] == "running" for row in rows):
            value = spread([row["rate"] for row in rows])
            if value is None:
                starved += 1  # a running job answered nothing in the window
            elif min(row["rate"] for row in rows) < fewest:
                thin += 1
            else:
                spreads.append(value)
    return {"max": max(spreads) if spreads else None,
            "median": float(np.median(spreads)) if spreads else None,
            "samples": len(spreads), "starved": starved, "thin": thin,
            "min_sub_jobs": SPREAD_MIN_SUB_JOBS}


def fair_share_windows(samples: list[dict[str, Any]], options: InferenceOptions,
                       tolerance: float = FAIR_TOLERANCE) -> dict[str, Any]:
    """Per job, the share of the windows in which it had work where its query rate was
    within `tolerance` of its fair share (under fair share every running job's fair rate
    is the same: the mean of the running jobs' rates). A window counts for a job at every
    sample once every job has run a whole window, while the job is running; nothing is left
    out: a starved job (rate 0) is a window missed."""
    started = max((min(row["t"] for row in samples if row["job"] == job
                       and row["state"] == "running")
                   for job in {row["job"] for row in samples}), default=0.0)
    met: dict[str, int] = {}
    counted: dict[str, int] = {}
    for t in sorted({row["t"] for row in samples}):
        running = [row for row in samples if row["t"] == t and row["state"] == "running"]
        if t < started + options.window_s or not running:
            continue
        fair = sum(row["rate"] for row in running) / len(running)
        for row in running:
            counted[row["job"]] = counted.get(row["job"], 0) + 1
            if fair > 0 and row["rate"] > 0 and max(row["rate"] / fair,
                                                    fair / row["rate"]) <= tolerance:
                met[row["job"]] = met.get(row["job"], 0) + 1
    within = {job: met.get(job, 0) / count for job, count in counted.items()}
    worst = min(within, key=lambda job: within[job], default=None)
    return {"tolerance": tolerance, "windows": counted, "within": within,
            "worst_job": worst, "worst_within": within[worst] if worst else None}


def coordinator_cpu(before: dict[str, Any], after: dict[str, Any],
                    final: dict[str, Any]) -> dict[str, Any]:
    """The coordinator's CPU seconds between the jobs' start and their end, per sub-job it
    dispatched (None when it restarted between: its count began again)."""
    dispatched = sum(job["sub_jobs"] + job["reruns"] for job in final.values())
    same = before["pid"] == after["pid"] and after["cpu_s"] >= before["cpu_s"]
    seconds = after["cpu_s"] - before["cpu_s"] if same else None
    return {"cpu_s": seconds, "sub_jobs_dispatched": dispatched,
            "per_sub_job_ms": (1000.0 * seconds / dispatched
                               if seconds is not None and dispatched else None)}


def _summary(options: InferenceOptions, store: Storage, final: dict[str, Any],
             samples: list[dict[str, Any]], failures: list[dict[str, Any]],
             began: float, jobs: dict[str, str]) -> dict[str, Any]:
    checks = {name: exactly_once(store, job, jobs[name]) for name, job in final.items()
              if job["state"] == "done"}
    makespan = max((row["t"] for row in samples), default=time.time() - began)
    total = sum(job["processed"] for job in final.values())
    return {
        "policy": options.policy, "workers": options.workers, "jobs": options.jobs,
        "target": options.target,
        "rate_spread_after_window": rate_spread(samples, options),
        "fair_share_windows": fair_share_windows(samples, options),
        "throughput_qps": total / makespan if makespan > 0 else None,
        "makespan_s": makespan,
        "jobs_final": {name: {key: job[key] for key in (
            "state", "queries", "processed", "latency", "cost_per_query_s", "reruns",
            "duplicates_discarded")} | {"accuracy": job.get("accuracy")}
            for name, job in final.items()},
        "failures": failures,
        "failures_seen": {
            "workers_killed": sum(1 for e in failures if e["killed"] != "coordinator"),
            "coordinator_killed": any(e["killed"] == "coordinator" for e in failures)},
        "rate_recovery": failure_recovery(samples, failures),
        "exactly_once": {"ok": bool(checks) and len(checks) == len(final)
                         and all(c["ok"] for c in checks.values()),
                         **{key: sum(c[key] for c in checks.values()) for key in (
                             "lost", "duplicated", "unknown", "mismatched", "reruns",
                             "duplicates_discarded")},
                         "jobs": checks},
    }
