"""The whole experiment: start the servers and workers, run each policy in turn on the same
schedule and trace, and write the results folder."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from workloads.common.actors import start_actor
from workloads.common.provenance import provenance
from workloads.common.results import ResultsWriter
from workloads.common.spot_market.capacity import CapacityTrace, load_capacity_trace
from workloads.common.spot_market.trace import PriceTrace, job_prices
from workloads.common.storage import Storage
from workloads.doll.engine import cost_reference
from workloads.doll.evaluator import Evaluator
from workloads.doll.fleet import Fleet
from workloads.doll.options import DollOptions
from workloads.doll.parameter_server import SyncParameterServer
from workloads.doll.policies import BUILTINS, load_policy_class, policy_name
from workloads.doll.policy_run import PolicyFailed, PolicyResult, PolicyRun, Servers
from workloads.doll.price_server import PriceServer


def start_servers(config: DollOptions, trace: PriceTrace,
                  say: Callable[[str], None] | None = None,
                  capacity: CapacityTrace | None = None) -> Servers:
    parameter_server = start_actor(
        SyncParameterServer,
        config.hidden,
        config.learning_rate,
        config.k,
        options={"max_concurrency": 1000},
    )
    fleet = Fleet(config.worker_rates(), config.batch_size, config.hidden, parameter_server,
                  say)
    return Servers(
        fleet=fleet,
        parameter_server=parameter_server,
        evaluator=start_actor(Evaluator, config.hidden),
        price_server=start_actor(PriceServer, trace, config.compression),
        mean_spot_price=trace.mean_price(),
        capacity=capacity,
    )


def check_inputs(config: DollOptions) -> tuple[PriceTrace, CapacityTrace | None]:
    """Every input file, before anything starts: the price trace, the capacity trace and the
    user's policy file (loaded, its classes found); one UserError naming the file."""
    trace = job_prices(config.trace, config.zone, config.product, config.spot_price)
    capacity = None if config.capacity_trace is None \
        else load_capacity_trace(config.capacity_trace, config.capacity_reading)
    policy_file = config.policy_file or config.user_policy_file()
    for entry in config.policies:
        if policy_file is not None and entry not in BUILTINS:
            load_policy_class(policy_file, policy_name(entry))
    return trace, capacity


def run_policies(
    config: DollOptions, servers: Servers, say: Callable[[str], None]
) -> dict[str, PolicyResult]:
    """Each policy in turn; one that fails is reported in one line and as `failed` in its
    result, and the others still run."""
    results: dict[str, PolicyResult] = {}
    for entry in config.policies:
        policy = policy_name(entry)
        say(f"[{policy}] starting: {config.workers} workers, preemption "
            f"{'capacity trace' if servers.capacity is not None else config.preemption}")
        try:
            results[policy] = asyncio.run(PolicyRun(entry, config, servers, say).run())
        except PolicyFailed as error:
            say(f"error: {error}")
            results[policy] = PolicyResult({"failed": str(error)})
            continue
        summary = results[policy].summary
        say(
            f"[{policy}] done: finish {summary['finish_s']:.1f}s "
            f"(deadline {summary['deadline_s']:.1f}s), cost ${summary['cost']:.5f}, "
            f"accuracy {summary['accuracy']:.3f}, preemptions {summary['preemptions']}"
        )
    return results


def with_cost_ratios(config: DollOptions, results: dict[str, PolicyResult]) -> dict[str, Any]:
    """policies.<name> with cost_ratio to this run's on-demand policy (or, when it was not
    run, to the all-on-demand cost of finishing in θ₀)."""
    ran = {name: result for name, result in results.items() if "failed" not in result.summary}
    reference = cost_reference(config, ran["on-demand"].summary["cost"] if "on-demand" in ran
                               else None)
    return {
        name: result.summary if name not in ran
        else {**result.summary, "cost_ratio": result.summary["cost"] / reference}
        for name, result in results.items()
    }


def run_experiment(
    config: DollOptions, say: Callable[[str], None] = print, servers: Servers | None = None
) -> Storage:
    """Everything, from a validated config to the written results folder; on `servers`
    started by the caller for this config (kept running), or on its own."""
    trace, capacity = check_inputs(config)
    own = servers is None
    running = start_servers(config, trace, say, capacity) if servers is None \
        else replace(servers, capacity=capacity)
    try:
        results = run_policies(config, running, say)
    finally:
        if own:
            running.fleet.shutdown()
    writer = ResultsWriter("doll", config.out, config.s3_endpoint)
    for result in results.values():
        for name, rows in result.records.items():
            writer.add_records(name, rows)
    summary = {
        "target": config.target,
        "trace": {"file": config.trace.name, "zone": config.zone, "product": config.product}
        if config.spot_price is None else {"fixed_spot_price": config.spot_price},
        "on_demand_price": config.on_demand_price,
        "mean_spot_price": trace.mean_price(),
        "deadline_factor": config.deadline_factor,
        "alpha": config.alpha,
        "workers": config.workers,
        "preemption": config.preemption,
        "seed": config.seed,
        "capacity_trace": None if capacity is None else {
            "file": capacity.file.name, "gap_seconds": capacity.gap_s,
            "ticks": len(capacity.counts), "mean": capacity.mean(),
            "reading": config.capacity_reading,
        },
        "rules": config.rules,
        "cost_ratio_reference": "on-demand run"
        if "failed" not in results.get("on-demand", PolicyResult({"failed": ""})).summary
        else "analytic θ₀",
        "policies": with_cost_ratios(config, results),
    }
    inputs = {} if config.spot_price is not None else {"trace": config.trace}
    if config.capacity_trace is not None:
        inputs["capacity_trace"] = config.capacity_trace
    policy_file = config.policy_file or config.user_policy_file()
    if policy_file is not None:
        inputs["policy_file"] = policy_file
    document = provenance(config.parameters(), inputs, config.target, {"seed": config.seed})
    storage = writer.finish(summary, document, to_log=config.results_to_log)
    say(f"results: {storage.uri}")
    return storage
