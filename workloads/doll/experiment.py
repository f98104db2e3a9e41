"""The whole experiment: start the servers and workers, run each policy in turn on the same
schedule and trace, and write the results folder."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from workloads.common.actors import start_actor
from workloads.common.provenance import provenance
from workloads.common.results import ResultsWriter
from workloads.common.spot_market.trace import PriceTrace, load_trace
from workloads.common.storage import Storage
from workloads.doll.evaluator import Evaluator
from workloads.doll.fleet import Fleet
from workloads.doll.options import DollOptions
from workloads.doll.parameter_server import SyncParameterServer
from workloads.doll.policy_run import PolicyResult, PolicyRun, Servers
from workloads.doll.price_server import PriceServer


def start_servers(config: DollOptions, trace: PriceTrace,
                  say: Callable[[str], None] | None = None) -> Servers:
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
    )


def run_policies(
    config: DollOptions, servers: Servers, say: Callable[[str], None]
) -> dict[str, PolicyResult]:
    results: dict[str, PolicyResult] = {}
    for policy in config.policies:
        say(f"[{policy}] starting: {config.workers} workers, preemption {config.preemption}")
        results[policy] = asyncio.run(PolicyRun(policy, config, servers, say).run())
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
    if "on-demand" in results:
        reference = results["on-demand"].summary["cost"]
    else:
        any_summary = next(iter(results.values())).summary
        reference = config.workers * config.on_demand_price * any_summary["theta0_s"] / 3600.0
    return {
        name: {**result.summary, "cost_ratio": result.summary["cost"] / reference}
        for name, result in results.items()
    }


def run_experiment(
    config: DollOptions, say: Callable[[str], None] = print, servers: Servers | None = None
) -> Storage:
    """Everything, from a validated config to the written results folder; on `servers`
    started by the caller for this config (kept running), or on its own."""
    trace = load_trace(config.trace, config.zone, config.product)
    own = servers is None
    running = start_servers(config, trace, say) if servers is None else servers
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
        "trace": {"file": config.trace.name, "zone": config.zone, "product": config.product},
        "on_demand_price": config.on_demand_price,
        "mean_spot_price": trace.mean_price(),
        "deadline_factor": config.deadline_factor,
        "alpha": config.alpha,
        "workers": config.workers,
        "preemption": config.preemption,
        "seed": config.seed,
        "cost_ratio_reference": "on-demand run" if "on-demand" in results else "analytic θ₀",
        "policies": with_cost_ratios(config, results),
    }
    document = provenance(
        config.parameters(), {"trace": config.trace}, config.target, {"seed": config.seed}
    )
    storage = writer.finish(summary, document, to_log=config.results_to_log)
    say(f"results: {storage.uri}")
    return storage
