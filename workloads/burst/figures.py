"""The burst figures, drawn on the user's side from a results folder (matplotlib, Agg):
a per-node Gantt chart of transfers and compute per scheduler, makespan per scheduler, and
(sweep) makespan vs bandwidth."""

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
    handles, labels = axes.get_legend_handles_labels()
    axes.legend(dict(zip(labels, handles, strict=True)).values(), dict.fromkeys(labels))
    return save_figure(figure, path)


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
    names = list(summary["runs"])
    figure, axes = plt.subplots(figsize=(5, 4))
    axes.bar(names, [summary["runs"][n]["makespan_s"] for n in names], color="tab:blue")
    axes.axhline(summary["lower_bound_s"], color="tab:red", linestyle="--", label="lower bound")
    axes.set(
        ylabel="makespan (s)",
        title=f"Makespan per scheduler ({summary['workload']}, "
        f"{summary['data']}, {summary['bandwidth_mbit']} Mbit/s)",
    )
    axes.legend()
    drawn.append(save_figure(figure, folder / "makespan.png"))
    return drawn


def draw_sweep(folder: Path, summaries: list[dict[str, Any]]) -> Path:
    figure, axes = plt.subplots(figsize=(6, 4))
    bandwidths = [s["bandwidth_mbit"] for s in summaries]
    for name in dict.fromkeys(n for s in summaries for n in s["runs"]):
        points = [
            (s["bandwidth_mbit"], s["runs"][name]["makespan_s"])
            for s in summaries
            if name in s["runs"]
        ]
        axes.plot(*zip(*points, strict=True), marker="o", label=name)
    axes.plot(bandwidths, [s["lower_bound_s"] for s in summaries], "r--", label="lower bound")
    axes.set(
        xlabel="cross-site bandwidth (Mbit/s)", ylabel="makespan (s)", title="Makespan vs bandwidth"
    )
    axes.legend()
    return save_figure(figure, folder / "makespan_vs_bandwidth.png")

