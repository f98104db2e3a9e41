"""summary.json from the runs: makespans, placement, bytes to the cloud, the lower bound,
the speedup; and the table printed at the end of a run."""

from __future__ import annotations

from typing import Any

from vocab.burst import SITE_CLOUD, SITE_ONPREM
from workloads.burst.bound import lower_bound
from workloads.burst.cluster import NodeInfo
from workloads.burst.inputs import TaskSpec
from workloads.burst.options import SCHEDULERS, SHAPED_LABS, BurstOptions
from workloads.burst.scheduling.base import RunResult


def compute_seconds(results: list[RunResult]) -> dict[str, float]:
    """Per task, its shortest measured compute time over the runs given."""
    times: dict[str, float] = {}
    for result in results:
        for record in result.records:
            seconds = record["compute_end"] - record["compute_start"]
            times[record["task"]] = min(seconds, times.get(record["task"], seconds))
    return times


def bound_for(
    config: BurstOptions,
    tasks: list[TaskSpec],
    results: list[RunResult],
    workers: list[NodeInfo],
    task_cpus: int,
) -> float:
    """The lower bound from the compute times the runs measured (the shortest per task)."""
    seconds = compute_seconds(results)
    slots = {
        site: sum(n.cpus // task_cpus for n in workers if n.site == site)
        for site in (SITE_ONPREM, SITE_CLOUD)
    }
    link = None
    rate = shaped_mbit(config)
    if config.data == "nfs" and rate:
        link = rate * 1e6 / 8
    return lower_bound(
        [(seconds[t.name], float(t.nbytes)) for t in tasks],
        slots[SITE_ONPREM],
        slots[SITE_CLOUD],
        link,
    )


def shaped_mbit(config: BurstOptions) -> float | None:
    """The cross-site rate the link was really shaped to; None where nothing shaped it."""
    return config.bandwidth_mbit if config.lab in SHAPED_LABS else None


def run_summary(result: RunResult, extra: dict[str, Any]) -> dict[str, Any]:
    on_cloud = [r for r in result.records if r["site"] == SITE_CLOUD]
    return {
        "makespan_s": round(result.makespan_s, 3),
        "tasks": len(result.records),
        "tasks_on_cloud": len(on_cloud),
        "bytes_to_cloud": sum(r["bytes_moved"] for r in on_cloud),
        "retried_tasks": result.retried,
        "lost_nodes": len(result.lost_nodes),
        "lost_node_ids": result.lost_nodes,
        **extra,
    }


def summarize(
    config: BurstOptions,
    tasks: list[TaskSpec],
    results: dict[str, RunResult],
    extras: dict[str, dict[str, Any]],
    workers: list[NodeInfo],
    task_cpus: int,
) -> dict[str, Any]:
    """Each run's ratio is to the bound from its own measured compute times (CPU speed
    drifts between runs on a shared machine); `lower_bound_s` uses the shortest time per
    task over all runs, a bound for every run."""
    bound = bound_for(config, tasks, list(results.values()), workers, task_cpus)
    runs = {name: run_summary(result, extras.get(name, {})) for name, result in results.items()}
    for name, run in runs.items():
        own = bound_for(config, tasks, [results[name]], workers, task_cpus)
        run["lower_bound_s"] = round(own, 3)
        run["makespan_over_bound"] = round(run["makespan_s"] / own, 3) if own else None
    speedup = same_compute = None
    if "default" in runs and "data-aware" in runs:
        default, aware = runs["default"], runs["data-aware"]
        speedup = round(default["makespan_s"] / aware["makespan_s"], 3)
        if default["makespan_over_bound"] and aware["makespan_over_bound"]:
            same_compute = round(default["makespan_over_bound"] / aware["makespan_over_bound"], 3)
    return {
        "lab": config.lab,
        "target": config.target,
        "bandwidth_mbit": shaped_mbit(config),  # null: the link was not shaped
        "profile": config.profile,
        "workload": config.workload,
        "data": config.data,
        "task_count": len(tasks),
        "input_bytes": sum(t.nbytes for t in tasks),
        "task_cpus": task_cpus,
        "nodes": [{"role": n.role, "site": n.site, "cpus": n.cpus, "ip": n.ip} for n in workers],
        "lower_bound_s": round(bound, 3),
        "runs": runs,
        "speedup": speedup,
        # each run against the bound of its own compute times: the speedup with the CPU
        # speed drift of a shared machine between the two runs taken out
        "speedup_at_equal_compute": same_compute,
    }


def format_table(summary: dict[str, Any]) -> str:
    """One row per scheduler, then the bound and the speedup."""
    header = (
        f"{'scheduler':<11} {'makespan s':>10} {'/ bound':>8} {'tasks':>6} "
        f"{'on cloud':>9} {'MB to cloud':>12} {'retried':>8} {'lost nodes':>10}"
    )
    rate = summary["bandwidth_mbit"]
    link = f"{rate} Mbit/s" if rate is not None else "an unshaped link"
    lines = [
        f"burst {summary['workload']} / {summary['data']} at {link} ({summary['lab']} lab, "
        f"profile {summary['profile']})",
        header,
        "-" * len(header),
    ]
    ordered = [name for name in SCHEDULERS if name in summary["runs"]]
    for name, run in ((name, summary["runs"][name]) for name in ordered):
        ratio = run["makespan_over_bound"]
        lines.append(
            f"{name:<11} {run['makespan_s']:>10.2f} {ratio if ratio is not None else '-':>8} "
            f"{run['tasks']:>6} {run['tasks_on_cloud']:>9} {run['bytes_to_cloud'] / 1e6:>12.1f} "
            f"{run['retried_tasks']:>8} {run['lost_nodes']:>10}"
        )
    lines.append(
        f"lower bound {summary['lower_bound_s']:.2f} s; speedup (default / "
        f"data-aware): {summary['speedup'] or '-'} (at equal compute speed: "
        f"{summary.get('speedup_at_equal_compute') or '-'})"
    )
    return "\n".join(lines)
