"""summary.json from the runs: makespans, placement, bytes to the cloud, compute and CPU
time, the lower bound, the speedup; and the table printed at the end of a run.

One lower bound serves every scheduler of a run: it rests on the compute time per task the
calibration measured before any scheduler ran (per site), the bytes of each task and the
rate the link was shaped to. A scheduler that slows the tasks it runs is measured against
the same bound as one that does not. Each run's bound from its own measured compute times
is kept as a diagnostic only (`diagnostic_own_compute_bound_s`)."""

from __future__ import annotations

import statistics
from typing import Any

from vocab.burst import SITE_CLOUD, SITE_ONPREM, peer_site
from workloads.burst.bound import lower_bound
from workloads.burst.calibration import Calibration
from workloads.burst.cluster import NodeInfo
from workloads.burst.inputs import TaskSpec
from workloads.burst.options import SCHEDULERS, SHAPED_LABS, BurstOptions
from workloads.burst.scheduling.base import RunResult


def shaped_mbit(config: BurstOptions) -> float | None:
    """The cross-site rate the link was really shaped to; None where nothing shaped it."""
    return config.bandwidth_mbit if config.lab in SHAPED_LABS else None


def fetching_site(config: BurstOptions) -> str:
    """The site whose tasks' inputs cross the shaped link: nfs, the cloud (the inputs are
    on-prem); s3, on-prem (the bucket sits at the cloud's end; the cloud's fetch costs
    nothing the bound counts)."""
    return SITE_CLOUD if config.data == "nfs" else SITE_ONPREM


def link_mbit(config: BurstOptions) -> float | None:
    """The rate the fetching site's inputs cross: the site link (nfs) or the on-prem path to
    the bucket (s3), as shaped; None where nothing shaped it."""
    return shaped_mbit(config) if config.data == "nfs" else config.s3_link_mbit


def link_bytes_s(config: BurstOptions) -> float | None:
    """What the bound charges for moving a byte to the fetching site: nothing on an unshaped
    path."""
    rate = link_mbit(config)
    return rate * 1e6 / 8 if rate else None


def site_bound(
    config: BurstOptions,
    tasks: list[tuple[float, float]],
    slots: dict[str, int],
    fetching_factor: float,
) -> float:
    """lower_bound with the site that reads in place as its own and the fetching site as
    the one across the link: `tasks` are (compute seconds at the in-place site, bytes),
    `fetching_factor` the fetching site's compute time per in-place second."""
    fetching = fetching_site(config)
    return lower_bound(tasks, slots[peer_site(fetching)], slots[fetching],
                       link_bytes_s(config), fetching_factor=fetching_factor)


def site_slots(workers: list[NodeInfo], task_cpus: int) -> dict[str, int]:
    return {site: sum(n.cpus // task_cpus for n in workers if n.site == site)
            for site in (SITE_ONPREM, SITE_CLOUD)}


def common_bound(
    config: BurstOptions,
    tasks: list[TaskSpec],
    calibration: Calibration,
    workers: list[NodeInfo],
    task_cpus: int,
) -> float:
    """The bound for every scheduler: calibrated compute per task per site (a site without a
    worker takes the other's), each task's bytes, the shaped path the fetching site's
    inputs cross (the cheapest feasible fetch: the other site reads in place, or, for s3,
    the cloud downloads in its region)."""
    compute = calibration.compute_s
    per_site = {SITE_ONPREM: compute.get(SITE_ONPREM, compute.get(SITE_CLOUD, 0.0))}
    per_site[SITE_CLOUD] = compute.get(SITE_CLOUD, per_site[SITE_ONPREM])
    fetching = fetching_site(config)
    in_place, across = per_site[peer_site(fetching)], per_site[fetching]
    return site_bound(config, [(in_place, float(t.nbytes)) for t in tasks],
                      site_slots(workers, task_cpus),
                      across / in_place if in_place > 0 else 1.0)


def own_compute_bound(
    config: BurstOptions,
    tasks: list[TaskSpec],
    result: RunResult,
    workers: list[NodeInfo],
    task_cpus: int,
) -> float:
    """Diagnostic: the bound from this run's own measured compute time of each task (a
    scheduler that slows its tasks raises it)."""
    seconds = {r["task"]: r["compute_end"] - r["compute_start"] for r in result.records}
    return site_bound(config, [(seconds[t.name], float(t.nbytes)) for t in tasks],
                      site_slots(workers, task_cpus), 1.0)


def compute_stats(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean compute time of the run's tasks (and per site), and the CPU their processes used."""
    def mean(values: list[float]) -> float | None:
        return round(statistics.fmean(values), 4) if values else None

    def seconds(record: dict[str, Any]) -> float:
        return float(record["compute_end"] - record["compute_start"])

    return {
        "compute_s_mean": mean([seconds(r) for r in records]),
        "compute_s_mean_by_site": {
            site: mean([seconds(r) for r in records if r["site"] == site])
            for site in (SITE_ONPREM, SITE_CLOUD) if any(r["site"] == site for r in records)
        },
        "compute_cpu_s_mean": mean([r["compute_cpu_s"] for r in records
                                    if r.get("compute_cpu_s") is not None]),
        "transfer_cpu_s": round(sum(r.get("transfer_cpu_s") or 0.0 for r in records), 3),
    }


def idle_slot_seconds(result: RunResult, slots: dict[str, int]) -> dict[str, float]:
    """Per site: its compute slots' time during the makespan in which they computed nothing
    (waiting for data, for a placement, or with nothing left to run)."""
    busy = dict.fromkeys(slots, 0.0)
    for record in result.records:
        busy[record["site"]] = busy.get(record["site"], 0.0) + (
            record["compute_end"] - record["compute_start"])
    return {site: round(max(0.0, count * result.makespan_s - busy.get(site, 0.0)), 2)
            for site, count in slots.items() if count}


def run_summary(result: RunResult, bound: float, slots: dict[str, int],
                extra: dict[str, Any]) -> dict[str, Any]:
    on_cloud = [r for r in result.records if r["site"] == SITE_CLOUD]
    return {
        "makespan_s": round(result.makespan_s, 3),
        "makespan_over_bound": round(result.makespan_s / bound, 3) if bound else None,
        "tasks": len(result.records),
        "tasks_on_cloud": len(on_cloud),
        "bytes_to_cloud": sum(r["bytes_moved"] for r in on_cloud),
        "retried_tasks": result.retried,
        "taken_over_tasks": result.taken_over,
        "taken_over_bytes_moved": result.taken_over_bytes_moved,
        "lost_nodes": len(result.lost_nodes),
        "lost_node_ids": result.lost_nodes,
        **compute_stats(result.records),
        "idle_slot_s": idle_slot_seconds(result, slots),
        "scheduler_cpu_s": None if result.scheduler_cpu_s is None
        else round(result.scheduler_cpu_s, 3),
        "site_cpu_s": {site: round(value, 2) for site, value in result.site_cpu_s.items()},
        # busy time of each site's CPUs that went to other processes of the machine, and
        # time the hypervisor took them away: the load the run shared its CPUs with
        "others_cpu_s": {site: round(value, 2) for site, value in result.others_cpu_s.items()},
        "stolen_cpu_s": {site: round(value, 2) for site, value in result.stolen_cpu_s.items()},
        "site_cpu_by_process_s": {  # what each site's CPU went to, by kind of process
            site: dict(sorted(((kind, round(value, 2)) for kind, value in kinds.items()
                               if value >= 0.05), key=lambda item: -item[1]))
            for site, kinds in result.site_cpu_by_kind_s.items()
        },
        **extra,
    }


def summarize(
    config: BurstOptions,
    tasks: list[TaskSpec],
    results: dict[str, RunResult],
    extras: dict[str, dict[str, Any]],
    workers: list[NodeInfo],
    task_cpus: int,
    calibration: Calibration,
    site_cpus: dict[str, list[int]],
) -> dict[str, Any]:
    bound = common_bound(config, tasks, calibration, workers, task_cpus)
    slots = site_slots(workers, task_cpus)
    runs = {name: run_summary(result, bound, slots, extras.get(name, {}))
            for name, result in results.items()}
    for name, run in runs.items():
        own = own_compute_bound(config, tasks, results[name], workers, task_cpus)
        run["diagnostic_own_compute_bound_s"] = round(own, 3)
    speedup = compute_ratio = cpu_ratio = None
    if "default" in runs and "data-aware" in runs:
        default, aware = runs["default"], runs["data-aware"]
        speedup = round(default["makespan_s"] / aware["makespan_s"], 3)
        if default["compute_s_mean"] and aware["compute_s_mean"]:
            compute_ratio = round(aware["compute_s_mean"] / default["compute_s_mean"], 3)
        if default["compute_cpu_s_mean"] and aware["compute_cpu_s_mean"]:
            cpu_ratio = round(aware["compute_cpu_s_mean"] / default["compute_cpu_s_mean"], 3)
    rate = shaped_mbit(config)
    return {
        "lab": config.lab,
        "target": config.target,
        "bandwidth_mbit": rate,  # null: the link was not shaped
        "profile": config.profile,
        "workload": config.kind,
        "data": config.data,
        "task_count": len(tasks),
        "input_bytes": sum(t.nbytes for t in tasks),
        "task_cpus": task_cpus,
        "nodes": [{"role": n.role, "site": n.site, "cpus": n.cpus, "ip": n.ip} for n in workers],
        "site_cpus": site_cpus,  # the CPUs each site's processes were allowed on (measured)
        "lower_bound_s": round(bound, 3),
        "bound": {
            "compute_s": calibration.to_dict()["compute_s"],
            "compute_cpu_s": calibration.to_dict()["compute_cpu_s"],
            "link_mbit": link_mbit(config),  # null: the bound charges no fetch
            "fetching_site": fetching_site(config) if link_mbit(config) else None,
            "slots": site_slots(workers, task_cpus),
            "calibration": calibration.to_dict(),
        },
        "runs": runs,
        "speedup": speedup,
        "compute_ratio": compute_ratio,  # data-aware's mean task compute time / default's
        "compute_cpu_ratio": cpu_ratio,  # the same for the CPU time of the tasks' processes
    }


def format_table(summary: dict[str, Any]) -> str:
    """One row per scheduler, then the common bound, the speedup and the compute ratio."""
    sites = [site for site in (SITE_ONPREM, SITE_CLOUD)
             if any(site in run["site_cpu_s"] for run in summary["runs"].values())]
    header = (
        f"{'scheduler':<11} {'makespan s':>10} {'/ bound':>8} {'compute s':>9} "
        f"{'sched CPU s':>11} "
        + "".join(f"{f'{site} CPU s':>13}" for site in sites)
        + f"{'others CPU s':>13} {'tasks':>5} {'on cloud':>8} {'MB to cloud':>11} "
        f"{'retried':>7} {'lost':>4}"
    )
    rate = summary["bandwidth_mbit"]
    link = f"{rate} Mbit/s" if rate is not None else "an unshaped link"
    lines = [
        f"burst {summary['workload']} / {summary['data']} at {link} ({summary['lab']} lab, "
        f"profile {summary['profile']})",
        header,
        "-" * len(header),
    ]

    def cell(value: float | None, width: int, digits: int) -> str:
        return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"

    def others(run: dict[str, Any]) -> float | None:
        """Other processes' busy time on the sites' CPUs (sites sharing CPUs count once)."""
        shared = {tuple(summary["site_cpus"].get(site, [])): value
                  for site, value in run.get("others_cpu_s", {}).items()}
        return sum(shared.values()) if shared else None

    ordered = [name for name in SCHEDULERS if name in summary["runs"]]
    for name, run in ((name, summary["runs"][name]) for name in ordered):
        lines.append(
            f"{name:<11} {run['makespan_s']:>10.2f} {cell(run['makespan_over_bound'], 8, 3)} "
            f"{cell(run['compute_s_mean'], 9, 2)} {cell(run['scheduler_cpu_s'], 11, 1)} "
            + "".join(cell(run["site_cpu_s"].get(site), 13, 1) for site in sites)
            + cell(others(run), 13, 1)
            + f" {run['tasks']:>5} {run['tasks_on_cloud']:>8} "
            f"{run['bytes_to_cloud'] / 1e6:>11.1f} {run['retried_tasks']:>7} "
            f"{run['lost_nodes']:>4}"
        )
    compute = ", ".join(f"{site} {seconds:.2f} s" for site, seconds
                        in summary["bound"]["compute_s"].items())
    lines.append(
        f"lower bound {summary['lower_bound_s']:.2f} s for both schedulers (compute per task, "
        f"calibration and default run: {compute}); speedup (default / data-aware): "
        f"{summary['speedup'] or '-'}; "
        f"data-aware's mean compute / default's: {summary['compute_ratio'] or '-'} (CPU "
        f"time: {summary.get('compute_cpu_ratio') or '-'})"
    )
    return "\n".join(lines)
