"""The whole experiment: inputs, each scheduler in turn on the same tasks, results folder."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from vocab.burst import SITES, TRANSFER_RESOURCE
from workloads.burst.calibration import Calibration, calibrate
from workloads.burst.cluster import NodeInfo, alive_nodes, head_node, task_cpus
from workloads.burst.cpu import CpuMeter, parse_site_namespaces, site_meter
from workloads.burst.data import DataSource, RunContext
from workloads.burst.inputs import TaskSpec, ensure_inputs, ensure_own_inputs, own_location
from workloads.burst.options import MB, OWN, BurstOptions
from workloads.burst.scheduling.base import RunResult, RunSetup, Say, Scheduler
from workloads.burst.scheduling.data_aware import DataAwareScheduler
from workloads.burst.scheduling.default import DefaultScheduler
from workloads.burst.summary import format_table, summarize
from workloads.burst.work import AsyncParameterServer, Workload, warm_up
from workloads.common.actors import start_actor
from workloads.common.provenance import provenance
from workloads.common.results import ResultsWriter
from workloads.common.storage import Storage
from workloads.common.user_code import place

SCHEDULERS: dict[str, Scheduler] = {
    "default": DefaultScheduler(),
    "data-aware": DataAwareScheduler(),
}


def data_source(config: BurstOptions) -> DataSource:
    """Where the inputs are: the on-prem folder or the bucket (own inputs: a sub-folder of
    it per set of inputs)."""
    own = "" if config.inputs is None or config.kind != OWN else "/" + own_location(
        config.inputs)
    if config.data == "nfs":
        return DataSource("nfs", str(Path(config.data_dir).resolve()) + own)
    source = DataSource("s3", f"s3://{config.bucket}/{config.s3_prefix}{own}",
                        config.s3_endpoint)
    if config.s3_endpoint:
        _ensure_bucket(str(config.bucket), config.s3_endpoint)
    return source


def _ensure_bucket(bucket: str, endpoint_url: str) -> None:
    """A local S3 starts empty: create the bucket there (a real bucket comes from the stack)."""
    from workloads.common.aws_client import aws_client

    client = aws_client("s3", endpoint_url=endpoint_url)
    if bucket not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
        client.create_bucket(Bucket=bucket)


def write_inputs(config: BurstOptions, source: DataSource, say: Say) -> list[TaskSpec]:
    """The run's tasks, their inputs written to the data location unless already there."""
    if config.kind == OWN and config.inputs is not None:
        return ensure_own_inputs(config.inputs, source.storage(), say)
    cache = None if config.inputs_cache is None else Path(config.inputs_cache)
    return ensure_inputs(config, source.storage(), say, cache)


def warm_workers(workers: dict[str, NodeInfo], cpus: int, source: DataSource) -> None:
    """Start a worker process for each task shape on every node, with its client of the
    data (see work.warm_up)."""
    refs = []
    for node_id in workers:
        pinned = NodeAffinitySchedulingStrategy(node_id, soft=False)
        refs.append(warm_up.options(num_cpus=cpus, scheduling_strategy=pinned).remote(source))
        refs.append(
            warm_up.options(resources={TRANSFER_RESOURCE: 1}, scheduling_strategy=pinned).remote(
                source)
        )
    ray.get(refs)


@contextmanager
def run_setup(
    name: str, config: BurstOptions, source: DataSource, nodes: list[NodeInfo], cpus: int
) -> Iterator[RunSetup]:
    """What one run (or the calibration) needs: a staging folder of its own, warm workers
    and, for param-server, its own parameter server on the head, started (removed after)."""
    head = head_node(nodes)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    context = RunContext(
        source,
        str(Path(config.stage_dir).resolve() / f"{stamp}-{name}"),
        {n.node_id: n.site for n in nodes},
        head.node_id,
    )
    server = None
    if config.workload == "param-server":
        server = start_actor(
            AsyncParameterServer,
            config.seed,
            options={
                "scheduling_strategy": NodeAffinitySchedulingStrategy(head.node_id, soft=False),
                "max_concurrency": 64,
            },
        )
        ray.get(server.stats.remote())  # started before the run's clock, as the workers are
    workers = {n.node_id: n for n in nodes if n.is_worker}
    warm_workers(workers, cpus, source)
    script = None if config.script is None else place(config.script)
    workload = Workload(config.kind, config.seed, server, script, config.function)
    try:
        yield RunSetup(context, workload, workers, cpus,
                       stage_ahead_bytes=config.stage_ahead_mb * MB)
    finally:
        if server is not None:
            ray.kill(server)


def run_one(
    name: str,
    config: BurstOptions,
    source: DataSource,
    tasks: list[TaskSpec],
    nodes: list[NodeInfo],
    cpus: int,
    meter: CpuMeter,
    site_cpus: dict[str, list[int]],
    say: Say,
) -> tuple[RunResult, dict[str, Any]]:
    with run_setup(name, config, source, nodes, cpus) as setup:
        say(
            f"[{name}] {len(tasks)} {config.kind} tasks, {cpus} CPUs each, on "
            + ", ".join(f"{n.role} {n.ip} ({n.cpus} CPUs)" for n in setup.nodes.values())
        )
        before = meter.read()
        result = SCHEDULERS[name].run(setup, tasks, say)
        used = meter.read().since(before)
        result.scheduler_cpu_s, result.site_cpu_s = used.own_s, used.sites_s
        result.site_cpu_by_kind_s = used.kinds_s
        compute_sites = {site: ids for site, ids in site_cpus.items() if site in SITES}
        result.others_cpu_s = used.others_s(compute_sites)
        result.stolen_cpu_s = used.stolen_s(compute_sites)
        say(f"[{name}] makespan {result.makespan_s:.2f}s, scheduler CPU {used.own_s:.1f}s"
            + "".join(f", {site} CPU {value:.1f}s" for site, value in used.sites_s.items())
            + "".join(f", other processes on {site}'s CPUs {value:.1f}s"
                      for site, value in result.others_cpu_s.items()))
        extra: dict[str, Any] = {}
        server = setup.workload.parameter_server
        if server is not None:
            # ray.get's stub picks its list overload for an untyped actor method's ObjectRef
            extra = cast(dict[str, Any], ray.get(server.stats.remote()))
    return result, extra


def calibration_pass(
    config: BurstOptions, source: DataSource, tasks: list[TaskSpec], nodes: list[NodeInfo],
    cpus: int, say: Say,
) -> Calibration:
    with run_setup("calibration", config, source, nodes, cpus) as setup:
        return calibrate(setup, tasks, config.calibration_count, say)


def run_experiment(config: BurstOptions, say: Say = print) -> Storage:
    nodes = alive_nodes()
    cpus = task_cpus(nodes, config.task_cpus)
    workers = [n for n in nodes if n.is_worker]  # as the first run found them
    source = data_source(config)
    meter = site_meter(parse_site_namespaces(config.site_netns))
    site_cpus = meter.allowed_cpus()
    if site_cpus:
        say("CPUs per site: " + ", ".join(f"{site} {cpu_list(ids)}"
                                          for site, ids in site_cpus.items()))
    tasks = write_inputs(config, source, say)
    results: dict[str, RunResult] = {}
    extras: dict[str, dict[str, Any]] = {}
    passes = []
    with meter.running():
        for name in config.schedulers:
            nodes = alive_nodes()  # a node lost in one run is not offered to the next
            passes.append(calibration_pass(config, source, tasks, nodes, cpus, say))
            results[name], extras[name] = run_one(name, config, source, tasks, nodes, cpus,
                                                  meter, site_cpus, say)
            if name == "default":  # the baseline's tasks: samples of a run's conditions
                passes.append(Calibration.from_run(name, results[name].records))
    calibration = Calibration.pooled(passes)
    summary = summarize(config, tasks, results, extras, workers, cpus, calibration, site_cpus)
    writer = ResultsWriter("burst", config.out, config.s3_endpoint)
    for name, result in results.items():
        writer.add_records(f"tasks_{name}", result.records)
        if config.kind == OWN:
            writer.add_file(f"outputs/{name}.jsonl", own_outputs(tasks, result.records))
    inputs = {}
    if config.profile_file and Path(config.profile_file).is_file():
        inputs["profile"] = Path(config.profile_file)
    parameters = {
        **config.parameters(),
        "task_cpus_used": cpus,
        "data_uri": source.uri,
        "tasks": len(tasks),
        "site_cpus": site_cpus,
    }
    document = provenance(parameters, inputs, config.target, {"inputs": config.seed})
    storage = writer.finish(summary, document, to_log=config.results_to_log)
    say(format_table(summary))
    say(f"results: {storage.uri}")
    return storage


def own_outputs(tasks: list[TaskSpec], records: list[dict[str, Any]]) -> bytes:
    """outputs/<scheduler>.jsonl: one row {"input", "result"} per input, in input order."""
    results = {record["task"]: record["output"] for record in records}
    return "".join(json.dumps({"input": task.name, "result": results[task.name]},
                              sort_keys=True) + "\n" for task in tasks).encode()


def cpu_list(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids) or "none"
