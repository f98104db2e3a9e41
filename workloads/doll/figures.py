"""The paper's figures, drawn on the user's side from a results folder (matplotlib, Agg):
cost vs time, accuracy vs cost, cost ratio per policy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from workloads.common.figures import save_figure  # noqa: E402
from workloads.common.results import read_json, read_records  # noqa: E402
from workloads.common.storage import LocalStorage  # noqa: E402


def accuracy_at_cost(storage: LocalStorage, policy: str) -> tuple[np.ndarray, np.ndarray]:
    """(cost, accuracy) per test evaluation: processed -> time (updates) -> cost (timeline)."""
    tests = read_records(storage, f"{policy}_test")
    updates = read_records(storage, f"{policy}_updates")
    timeline = read_records(storage, f"{policy}_timeline")
    times = np.interp(
        [row["processed"] for row in tests],
        [0] + [row["processed"] for row in updates],
        [0.0] + [row["t"] for row in updates],
    )
    costs = np.interp(times, [row["t"] for row in timeline], [row["cost"] for row in timeline])
    return costs, np.array([row["accuracy"] for row in tests])


def draw(folder: Path) -> list[Path]:
    storage = LocalStorage(folder)
    summary = read_json(storage, "summary.json")
    # a policy that failed has no records to draw
    policies = [name for name, result in summary["policies"].items() if "failed" not in result]
    drawn = []

    figure, axes = plt.subplots(figsize=(6, 4))
    for policy in policies:
        timeline = read_records(storage, f"{policy}_timeline")
        axes.plot([r["t"] for r in timeline], [r["cost"] for r in timeline], label=policy)
    axes.set(xlabel="wall-clock time (s)", ylabel="cost ($)", title="Cost vs time")
    axes.legend()
    drawn.append(save_figure(figure, folder / "cost_vs_time.png"))

    figure, axes = plt.subplots(figsize=(6, 4))
    for policy in policies:
        costs, accuracy = accuracy_at_cost(storage, policy)
        axes.plot(costs, accuracy, marker=".", label=policy)
    axes.set(xlabel="cost ($)", ylabel="test accuracy", title="Accuracy vs cost")
    axes.legend()
    drawn.append(save_figure(figure, folder / "accuracy_vs_cost.png"))

    figure, axes = plt.subplots(figsize=(6, 4))
    ratios = [summary["policies"][p]["cost_ratio"] for p in policies]
    axes.bar(policies, ratios, color="tab:blue", label="measured")
    bounds = [(i, summary["policies"][p]["cost_bound"]) for i, p in enumerate(policies)]
    for drawn_before, (index, bound) in enumerate((i, b) for i, b in bounds if b is not None):
        label = "cost bound (paper)" if drawn_before == 0 else "_nolegend_"
        axes.hlines(bound, index - 0.4, index + 0.4, colors="tab:red", label=label)
    axes.set(ylabel="cost ratio to on-demand", title="Cost ratio per policy")
    axes.legend()
    drawn.append(save_figure(figure, folder / "cost_ratio.png"))
    return drawn



def cost_vs_finish(rows: list[dict[str, Any]], path: Path) -> Path:
    """The cost benchmark's runs: cost ratio to on-demand against finish/deadline, one
    point per run, a panel per trace, a colour per policy; the deadline and the paper's
    cost bound as lines."""
    policies = list(dict.fromkeys(row["policy"] for row in rows))
    products = list(dict.fromkeys(row["product"] for row in rows))
    figure, panels = plt.subplots(
        1, len(products), figsize=(5.5 * len(products), 4.5), sharey=True, squeeze=False
    )
    for axes, product in zip(panels[0], products, strict=True):
        for index, policy in enumerate(policies):
            mine = [r for r in rows if r["policy"] == policy and r["product"] == product]
            axes.scatter(
                [r["finish_s"] / r["deadline_s"] for r in mine],
                [r["cost_ratio"] for r in mine],
                color=f"C{index}",
                alpha=0.75,
                label=policy,
            )
        bounds = [r["cost_bound"] for r in rows
                  if r["product"] == product and r["cost_bound"] is not None]
        if bounds:
            axes.axhline(bounds[0], color="tab:red", linestyle=":", linewidth=1,
                         label=f"paper's bound {bounds[0]:.3f}")
        axes.axvline(1.0, color="black", linestyle="--", linewidth=1, label="deadline")
        axes.set(xlabel="finish / deadline", title=product)
        axes.legend(fontsize=7)
    panels[0][0].set_ylabel("cost ratio to on-demand")
    figure.suptitle("DOLL cost vs finish, one point per run")
    return save_figure(figure, path)


MAX_CDF_PANELS = 12
"""The simulator's CDF figure shows at most this many traces (the first, by name)."""


def draw_sim(folder: Path) -> list[Path]:
    """The simulator's figures from its results folder: each policy's mean cost ratio
    against its deadline-miss rate (95 % intervals as bars; a small point per trace), and
    the cost-ratio CDF of every policy, a panel per capacity trace."""
    summary = json.loads((folder / "summary.json").read_text())
    rows = [json.loads(line) for line in (folder / "runs.jsonl").read_text().splitlines()
            if line.strip()]
    policies = [name for name, result in summary["policies"].items() if "cost_ratio" in result]
    drawn = []

    figure, axes = plt.subplots(figsize=(6.5, 4.5))
    for index, policy in enumerate(policies):
        result = summary["policies"][policy]
        x, y = result["deadline_miss_rate"], result["cost_ratio"]
        xerr = _error_bar(x, result["deadline_miss_rate_ci95"])
        yerr = _error_bar(y, result["cost_ratio_ci95"])
        axes.errorbar([x], [y], xerr=xerr, yerr=yerr, fmt="o", color=f"C{index}",
                      capsize=3, label=policy)
        for by_trace in result.get("by_trace", {}).values():
            if "cost_ratio" in by_trace:
                axes.scatter([by_trace["deadline_miss_rate"]], [by_trace["cost_ratio"]],
                             color=f"C{index}", s=10, alpha=0.4)
    axes.set(xlabel="deadline-miss rate", ylabel="cost ratio to on-demand",
             title=f"Cost vs deadline misses ({summary['runs']} runs; small: per trace)")
    axes.legend(fontsize=8)
    drawn.append(save_figure(figure, folder / "cost_vs_misses.png"))

    traces = list(dict.fromkeys(row["capacity_trace"] for row in rows))[:MAX_CDF_PANELS]
    columns = min(len(traces), 3)
    lines = -(-len(traces) // columns)
    figure, panels = plt.subplots(lines, columns, figsize=(4.5 * columns, 3.5 * lines),
                                  sharex=True, sharey=True, squeeze=False)
    for axes, trace in zip(panels.flat, traces, strict=False):
        for index, policy in enumerate(policies):
            ratios = np.sort([row["cost_ratio"] for row in rows if row["policy"] == policy
                              and row["capacity_trace"] == trace and not row["failed"]])
            if len(ratios):
                axes.step(ratios, np.arange(1, len(ratios) + 1) / len(ratios), where="post",
                          color=f"C{index}", label=policy)
        axes.set_title(trace or "preemption chain", fontsize=9)
        axes.set_xlabel("cost ratio to on-demand")
    for axes in panels[:, 0]:
        axes.set_ylabel("fraction of runs")
    for axes in list(panels.flat)[len(traces):]:
        axes.set_visible(False)
    panels[0][0].legend(fontsize=7)
    figure.suptitle("Cost ratio CDF per capacity trace")
    drawn.append(save_figure(figure, folder / "cost_ratio_cdf.png"))
    return drawn


def _error_bar(value: float, interval: list[float] | None) -> list[list[float]] | None:
    if interval is None:
        return None
    return [[max(value - interval[0], 0.0)], [max(interval[1] - value, 0.0)]]
