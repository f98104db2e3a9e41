"""The burst figures, drawn on the user's side from a results folder (matplotlib, Agg):
a per-node Gantt chart of transfers and compute per scheduler; makespan per scheduler against
the lower bound the table uses, with the task compute and CPU time behind it; and (sweep)
makespan vs bandwidth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from workloads.common.figures import save_figure  # noqa: E402
from workloads.common.results import read_json, read_records  # noqa: E402
from workloads.common.storage import LocalStorage  # noqa: E402

COLORS = {"transfer": "tab:orange", "compute": "tab:blue"}


def gantt(records: list[dict[str, Any]], title: str, path: Path) -> Path:
    return save_figure(gantt_plot(records, title), path)


def gantt_plot(records: list[dict[str, Any]], title: str) -> plt.Figure:
    """One lane per node: each task's transfer (above) and compute (below) as bars."""
    lanes = sorted({(r["site"], r["role"], r["node_ip"]) for r in records})
    figure, axes = plt.subplots(figsize=(9, 1.0 + 0.9 * len(lanes)))
    for lane, (site, role, ip) in enumerate(lanes):
        mine = [r for r in records if (r["site"], r["role"], r["node_ip"]) == (site, role, ip)]
        for kind in ("transfer", "compute"):
            bars = [
                (r[f"{kind}_start"], r[f"{kind}_end"] - r[f"{kind}_start"])
                for r in mine
                if r[f"{kind}_start"] is not None
            ]
            offset = 0.2 if kind == "transfer" else -0.2
            axes.broken_barh(
                bars,
                (lane + offset - 0.18, 0.36),
                color=COLORS[kind],
                edgecolor="black",
                linewidth=0.3,
                label=kind if lane == 0 else None,
            )
    axes.set_yticks(range(len(lanes)), [f"{role} {ip}\n({site})" for site, role, ip in lanes])
    axes.set(xlabel="seconds since the first submission", title=title)
    legend_beside(axes)
    return figure


def legend_beside(axes: plt.Axes) -> None:
    """The legend right of the plotting area, outside it, one entry per label: it covers no
    bar or point however long the run (the layout makes room for it)."""
    handles, labels = axes.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    axes.legend(list(unique.values()), list(unique), loc="upper left",
                bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=9)


def legend_below(panel: plt.Axes, key: plt.Axes) -> None:
    """`panel`'s legend in `key`, an axes of its own below it (no frame, no ticks), so it
    covers none of the panel's bars or lines whatever their heights."""
    key.axis("off")
    handles, labels = panel.get_legend_handles_labels()
    key.legend(handles, labels, loc="upper center", ncols=2 if len(labels) > 2 else 1,
               fontsize=8, borderaxespad=0.0)


def draw(folder: Path) -> list[Path]:
    storage = LocalStorage(folder)
    summary = read_json(storage, "summary.json")
    drawn = []
    for name in summary["runs"]:
        drawn.append(
            gantt(
                read_records(storage, f"tasks_{name}"),
                f"{name}: {summary['workload']} / {summary['data']} at "
                f"{summary['bandwidth_mbit']} Mbit/s",
                folder / f"gantt_{name}.png",
            )
        )
    drawn.append(makespan_figure(summary, folder / "makespan.png"))
    return drawn


def makespan_figure(summary: dict[str, Any], path: Path) -> Path:
    return save_figure(makespan_plot(summary), path)


def makespan_plot(summary: dict[str, Any]) -> plt.Figure:
    """Makespan of each scheduler against the one lower bound of the table; the mean compute
    time of their tasks against the calibrated one; the CPU each site (and the scheduler
    within on-prem) used during each run."""
    names = list(summary["runs"])
    runs = [summary["runs"][n] for n in names]
    figure, ((span, compute, cpu), keys) = plt.subplots(
        2, 3, figsize=(13, 5.0), height_ratios=(4.2, 0.8))
    span.bar(range(len(names)), [r["makespan_s"] for r in runs], color="tab:blue")
    # each run's ratio under its name: above its bar the bound's line, close to the bar's
    # top when the run is close to the bound, would cross it
    span.set_xticks(range(len(names)), [
        name if run["makespan_over_bound"] is None
        else f"{name}\n{run['makespan_over_bound']:.2f}× bound"
        for name, run in zip(names, runs, strict=True)])
    span.axhline(summary["lower_bound_s"], color="tab:red", linestyle="--",
                 label=f"lower bound {summary['lower_bound_s']:.1f} s (both schedulers)")
    span.set(ylabel="makespan (s)",
             title=f"{summary['workload']}, {summary['data']}, "
             f"{summary['bandwidth_mbit']} Mbit/s")
    sites = sorted({site for r in runs for site in r.get("compute_s_mean_by_site", {})})
    width = 0.8 / max(1, len(sites))
    for i, site in enumerate(sites):
        compute.bar([x + i * width for x in range(len(names))],
                    [r["compute_s_mean_by_site"].get(site) or 0.0 for r in runs], width,
                    label=f"{site} tasks")
        calibrated = summary["bound"]["compute_s"].get(site)
        if calibrated is not None:
            compute.axhline(calibrated, color=f"C{i}", linestyle=":",
                            label=f"{site} calibrated {calibrated:.2f} s")
    compute.set_xticks([x + width * (len(sites) - 1) / 2 for x in range(len(names))], names)
    compute.set(ylabel="mean compute time per task (s)", title="task compute time")
    parts = [("scheduler", [r.get("scheduler_cpu_s") or 0.0 for r in runs])]
    sites_measured = [site for site in ("onprem", "cloud")
                      if any(site in r.get("site_cpu_s", {}) for r in runs)]
    parts += [(f"{site} site", [r["site_cpu_s"].get(site) or 0.0 for r in runs])
              for site in sites_measured]
    parts += [(f"others on {site}'s CPUs", [r.get("others_cpu_s", {}).get(site) or 0.0
                                            for r in runs])
              for site in sites_measured if any(r.get("others_cpu_s") for r in runs)]
    width = 0.8 / len(parts)
    for i, (label, values) in enumerate(parts):
        cpu.bar([x + i * width for x in range(len(names))], values, width, label=label)
    cpu.set_xticks([x + width * (len(parts) - 1) / 2 for x in range(len(names))], names)
    cpu.set(ylabel="CPU seconds during the run",
            title="CPU used (the scheduler runs on-prem)")
    for panel, key in zip((span, compute, cpu), keys, strict=True):
        legend_below(panel, key)
    return figure


def draw_sweep(folder: Path, summaries: list[dict[str, Any]]) -> Path:
    return save_figure(sweep_plot(summaries), folder / "makespan_vs_bandwidth.png")


def sweep_plot(summaries: list[dict[str, Any]]) -> plt.Figure:
    figure, axes = plt.subplots(figsize=(7.5, 4))
    bandwidths = [s["bandwidth_mbit"] for s in summaries]
    for name in dict.fromkeys(n for s in summaries for n in s["runs"]):
        points = [
            (s["bandwidth_mbit"], s["runs"][name]["makespan_s"])
            for s in summaries
            if name in s["runs"]
        ]
        axes.plot(*zip(*points, strict=True), marker="o", label=name)
    axes.plot(bandwidths, [s["lower_bound_s"] for s in summaries], "r--",
              label="lower bound (both schedulers)")
    axes.set(
        xlabel="cross-site bandwidth (Mbit/s)", ylabel="makespan (s)", title="Makespan vs bandwidth"
    )
    legend_beside(axes)
    return figure

