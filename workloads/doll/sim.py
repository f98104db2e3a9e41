"""`invoke sim-doll`: every policy replayed (replay.py, the lab's engine without Ray) over
capacity traces × start points × seeds, and the results folder a researcher can use:

- `runs.jsonl`: one row per policy × trace × start × seed, named as run-doll's summary
  names them (a failed row holds `failed` with its reason);
- `summary.json`: per policy, over all traces and per trace, the mean cost ratio and the
  deadline-miss rate, each with a 95 % interval that counts runs whose trace windows
  overlap as one (batch means: start points closer than a run's deadline span share a
  batch), and percentiles of the finish;
- `provenance.json`: every value applied and each input file with its sha256;
- figures (figures.py): cost ratio against deadline-miss rate, the cost-ratio CDF per trace.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workloads.common.options import OptionError
from workloads.common.provenance import provenance
from workloads.common.results import ResultsWriter, default_location
from workloads.common.spot_market.capacity import (
    CAPACITY_TRACE_FLAG,
    CapacityTrace,
    load_capacity_trace,
    spread_starts,
)
from workloads.common.spot_market.trace import PriceTrace, job_prices
from workloads.doll.engine import PolicyFailed, cost_reference
from workloads.doll.options import SimOptions
from workloads.doll.policies import BUILTINS, load_policy_class, policy_name
from workloads.doll.replay import timed_replay

WORKLOAD = "doll-sim"
PROGRESS_EVERY_S = 2.0
PERCENTILES = (5, 50, 95)


def capacity_files(paths: tuple[Path, ...]) -> list[Path]:
    """The trace files: each path given, or a folder's *.json files (sorted)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(path.glob("*.json"))
            if not inside:
                raise OptionError(CAPACITY_TRACE_FLAG, f"{path} holds no *.json file")
            found += inside
        else:
            found.append(path)
    names = [file.name for file in found]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise OptionError(CAPACITY_TRACE_FLAG, f"two traces go by one name: {repeated[0]} "
                                               f"(rows name a trace by its file name)")
    return found


def check_sim_inputs(options: SimOptions) -> tuple[PriceTrace, list[CapacityTrace]]:
    """Every input, before anything runs: the prices, each capacity trace, the start
    points and the user's policy file; one UserError naming the flag and file."""
    prices = job_prices(options.trace, options.zone, options.product, options.spot_price)
    traces = [load_capacity_trace(file, options.capacity_reading)
              for file in capacity_files(options.capacity_trace or ())]
    for trace in traces:
        start_points(options, trace)
    policy_file = options.user_policy_file()
    for entry in options.policies:
        if policy_file is not None and entry not in BUILTINS:
            load_policy_class(policy_file, policy_name(entry))
    return prices, traces


def span_ticks(options: SimOptions, trace: CapacityTrace) -> int:
    """The ticks of trace a run's deadline covers."""
    job = options.job(options.run_seeds()[0])
    theta0_s = job.work_points / (job.workers * job.rate)
    return math.ceil(job.deadline_factor * theta0_s * job.compression / trace.gap_s)


def start_points(options: SimOptions, trace: CapacityTrace) -> list[int]:
    """--start as given, or --starts spread over the trace (under Can't Be Late's rules
    each leaving a deadline's span of trace after it: the replay ends with the trace)."""
    span = span_ticks(options, trace) if options.cant_be_late else 0
    if options.start is None:
        return spread_starts(trace, options.starts, span)
    beyond = [tick for tick in options.start if tick + span >= len(trace.counts)]
    if beyond:
        raise OptionError("--start", f"tick {beyond[0]} is past what {trace.file.name} "
                          f"({len(trace.counts)} ticks) can start a run at"
                          + (f" with a deadline's {span} ticks after it" if span else ""))
    return list(options.start)


def simulate(options: SimOptions, out: Path | None = None,
             say: Callable[[str], None] = print) -> Path:
    """Every run, then the results folder (`out`, or a new one under results/doll-sim/);
    returns it."""
    prices, traces = check_sim_inputs(options)
    plan = [(trace, start) for trace in traces for start in start_points(options, trace)] \
        if traces else [(None, None)]
    seeds = options.run_seeds()
    total = len(plan) * len(seeds) * len(options.policies)
    say(f"sim-doll: {len(options.policies)} policies × {len(traces) or 'no'} capacity traces "
        f"× {len(plan) // max(len(traces), 1)} start points × {len(seeds)} seeds = "
        f"{total} runs")
    rows: list[dict[str, Any]] = []
    began = last_said = time.monotonic()
    out_of_time: dict[str, str] = {}
    for trace, start in plan:
        for seed in seeds:
            rows += run_group(options, prices, trace, start, seed, out_of_time)
            if time.monotonic() - last_said >= PROGRESS_EVERY_S:
                last_said = time.monotonic()
                say(f"sim-doll: {len(rows)}/{total} runs ({len(rows) / total:.0%}) in "
                    f"{last_said - began:.1f} s")
    elapsed = time.monotonic() - began
    say(f"sim-doll: {len(rows)} runs in {elapsed:.1f} s")
    return write_results(options, prices, traces, rows, elapsed, out)


def run_group(options: SimOptions, prices: PriceTrace, trace: CapacityTrace | None,
              start: int | None, seed: int, out_of_time: dict[str, str]) -> list[dict[str, Any]]:
    """Every policy on one trace, start point and seed, with cost ratios to the on-demand
    policy's run there (or to θ₀'s all-on-demand cost without one)."""
    config = options.job(seed)
    rows: list[dict[str, Any]] = []
    on_demand_cost: float | None = None
    for entry in options.policies:
        name = policy_name(entry)
        row: dict[str, Any] = {"policy": name,
                               "capacity_trace": None if trace is None else trace.file.name,
                               "start": start, "seed": seed}
        if name in out_of_time:
            rows.append({**row, "failed": out_of_time[name]})
            continue
        try:
            outcome, wall_s = timed_replay(entry, config, prices, trace, start,
                                           options.policy_time_s, options.arrivals)
        except PolicyFailed as error:
            if "--policy-time" in str(error):
                out_of_time[name] = str(error)
            rows.append({**row, "failed": str(error)})
            continue
        engine, finish_s, hours = outcome.engine, outcome.finish_s, config.compression / 3600
        meter = engine.meter
        if name == "on-demand":
            on_demand_cost = meter.cost
        rows.append({
            **row, "failed": None, "cost": meter.cost,
            "cost_usd": meter.cost * config.compression,
            "finish_s": finish_s, "deadline_s": engine.deadline_s,
            "finish_hours": finish_s * hours, "deadline_hours": engine.deadline_s * hours,
            "deadline_met": finish_s <= engine.deadline_s,
            "spot_hours": meter.spot_up_s * hours, "on_demand_hours": meter.on_demand_s * hours,
            "switches": engine.switches, "preemptions": engine.preemptions,
            "decisions": engine.decisions,
            "sim_s": round(wall_s, 6),
        })
    reference = cost_reference(config, on_demand_cost)
    for row in rows:
        if row["failed"] is None:
            row["cost_ratio"] = row["cost"] / reference
    return rows


# --- the summary ------------------------------------------------------------------------------


def batch_means_interval(values_by_batch: list[list[float]],
                         within: tuple[float, float] = (-math.inf, math.inf),
                         ) -> tuple[float, list[float] | None]:
    """The mean of every value and its 95 % interval from the batch means (Student's t over
    the batches, which are taken as independent; the runs inside one are not), cut to the
    range the values can take (`within`: a rate's interval does not reach below 0); None
    with fewer than two batches."""
    values = [value for batch in values_by_batch for value in batch]
    mean = statistics.fmean(values)
    means = [statistics.fmean(batch) for batch in values_by_batch if batch]
    if len(means) < 2:
        return mean, None
    from scipy.stats import t  # not at import: invoke reads the task list

    half = float(t.ppf(0.975, len(means) - 1)) * statistics.stdev(means) / math.sqrt(len(means))
    return mean, [max(mean - half, within[0]), min(mean + half, within[1])]


def batches_of(rows: list[dict[str, Any]], window_ticks: dict[str, int]
               ) -> list[list[dict[str, Any]]]:
    """Runs grouped so that runs whose trace windows overlap share a group: per trace, start
    points in order, a new group once a start is a whole window past the group's first; a
    run without a capacity trace (the chain: seeds are independent) is a group of its own."""
    groups: list[list[dict[str, Any]]] = []
    by_trace: dict[str | None, list[dict[str, Any]]] = {}
    for row in rows:
        by_trace.setdefault(row["capacity_trace"], []).append(row)
    for name, runs in by_trace.items():
        if name is None:
            groups += [[row] for row in runs]
            continue
        first: int | None = None
        for row in sorted(runs, key=lambda r: r["start"]):
            if first is None or row["start"] - first >= window_ticks[name]:
                groups.append([])
                first = row["start"]
            groups[-1].append(row)
    return groups


def summarize(rows: list[dict[str, Any]], window_ticks: dict[str, int]) -> dict[str, Any]:
    ran = [row for row in rows if row["failed"] is None]
    if not ran:
        return {"runs": len(rows), "failed": len(rows)}
    groups = batches_of(ran, window_ticks)
    ratio, ratio_ci = batch_means_interval([[r["cost_ratio"] for r in g] for g in groups])
    missed, missed_ci = batch_means_interval(
        [[0.0 if r["deadline_met"] else 1.0 for r in g] for g in groups], within=(0.0, 1.0))
    finish = [r["finish_s"] / r["deadline_s"] for r in ran]
    hours = [r["finish_hours"] for r in ran]
    return {
        "runs": len(rows), "failed": len(rows) - len(ran), "independent_windows": len(groups),
        "cost_ratio": ratio, "cost_ratio_ci95": ratio_ci,
        "deadline_miss_rate": missed, "deadline_miss_rate_ci95": missed_ci,
        "finish_over_deadline": percentiles(finish),
        "finish_hours": percentiles(hours),
    }


def percentiles(values: list[float]) -> dict[str, float]:
    import numpy as np  # not at import: invoke reads the task list

    return {f"p{q}": float(np.percentile(values, q)) for q in PERCENTILES}


def write_results(options: SimOptions, prices: PriceTrace, traces: list[CapacityTrace],
                  rows: list[dict[str, Any]], elapsed_s: float, out: Path | None) -> Path:
    window = {trace.file.name: span_ticks(options, trace) for trace in traces}
    policies: dict[str, Any] = {}
    for entry in options.policies:
        name = policy_name(entry)
        own = [row for row in rows if row["policy"] == name]
        policies[name] = summarize(own, window)
        failures = sorted({row["failed"] for row in own if row["failed"]})
        if failures:
            policies[name]["failures"] = failures[:5]
        if traces:
            policies[name]["by_trace"] = {
                trace.file.name: summarize(
                    [row for row in own if row["capacity_trace"] == trace.file.name], window)
                for trace in traces
            }
    job = options.job(options.run_seeds()[0])
    summary = {
        "workers": options.workers, "rules": options.rules,
        "deadline_factor": job.deadline_factor, "compression": job.compression,
        "theta0_hours": job.work_points / (job.workers * job.rate) * job.compression / 3600,
        "capacity_traces": [{"file": t.file.name, "gap_seconds": t.gap_s,
                             "ticks": len(t.counts), "mean": t.mean(),
                             "reading": options.capacity_reading,
                             "window_ticks": window[t.file.name]} for t in traces],
        "seeds": list(options.run_seeds()),
        "runs": len(rows), "sim_seconds": elapsed_s,
        "cost_ratio_reference": "on-demand run" if "on-demand" in options.policies
        else "analytic θ₀",
        "policies": policies,
    }
    inputs: dict[str, Path] = {} if options.spot_price is not None else {"trace": prices.file}
    inputs.update({f"capacity_trace {trace.file.name}": trace.file for trace in traces})
    policy_file = options.user_policy_file()
    if policy_file is not None:
        inputs["policy_file"] = policy_file
    parameters = options.parameters()
    parameters["applied"] = {"compression": job.compression,
                             "deadline_factor": job.deadline_factor,
                             "launch_delay_s": job.launch_delay_s}
    seeds = options.run_seeds()
    document = provenance(parameters, inputs, "local", {"first_seed": seeds[0],
                                                        "seeds": len(seeds)})
    writer = ResultsWriter(WORKLOAD, str(out or default_location(WORKLOAD)))
    writer.add_file("runs.jsonl", "".join(json.dumps(row, sort_keys=True) + "\n"
                                          for row in rows).encode())
    storage = writer.finish(summary, document)
    return Path(storage.uri)
