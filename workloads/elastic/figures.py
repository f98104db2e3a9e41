"""The run's figure, drawn on the user's side from a results folder (matplotlib, Agg); in
survivor mode (--torchft) the replica groups up instead of the workers, and each replica
group's leave and join marked on the first and the metric's panel:

1. workers training over time, each worker group's start-up shaded, the notices, the notice
   checkpoints Ray Train committed and the nodes killed at their deadline marked;
2. progress: the step each group completed over time — a restart that resumes from an older
   checkpoint shows as a drop (steps computed again), one that loses nothing does not;
3. the chosen metric (`--metric`, else the first the script reported) over time, a line
   per worker group (none across a restart, when no step ran);
4. cost over time next to the same run all on demand (when the run was priced).

The time axis starts a little before the first worker group was placed: the lab, the job
and Ray Train's start before it are one number in the title, not most of the axis. Runs that
honour notices and runs that ignore them are drawn the same way, for side-by-side reading.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from workloads.common.figures import save_figure  # noqa: E402
from workloads.common.results import read_json, read_records  # noqa: E402
from workloads.common.storage import LocalStorage  # noqa: E402
from workloads.elastic.summary import first_rows  # noqa: E402

FIGURE = "elastic.png"
LAB_EVENTS = Path("spotlab") / "events.jsonl"
LEAD_IN_S = 3.0


def _records(storage: LocalStorage, folder: Path, name: str) -> list[dict[str, Any]]:
    return read_records(storage, name) if (folder / "records" / f"{name}.jsonl").is_file() else []


def _kills(folder: Path, started: float) -> list[float]:
    """When a spot node of the lab was killed at its deadline (run seconds)."""
    path = folder / LAB_EVENTS
    if not path.is_file():
        return []
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e["t"] - started for e in events if e["event"] == "kill"]


def _workers_over_time(attempts: list[dict[str, Any]], holds: list[dict[str, Any]],
                       steps: list[dict[str, Any]], wall_s: float
                       ) -> tuple[list[float], list[int]]:
    """Each group's size from its first step to its last (or its hold), none in between."""
    changes: list[tuple[float, int]] = []
    for attempt in attempts:
        mine = [s["t_run"] for s in steps if s["attempt"] == attempt["attempt"]]
        if not mine:
            continue
        held = [h["t_run"] for h in holds if h["attempt"] == attempt["attempt"]
                and not h.get("expired")]
        changes.append((min(mine), attempt["world_size"]))
        changes.append((min(held) if held else max(mine), 0))
    changes.sort()
    times = [t for t, _ in changes] + [wall_s]
    counts = [count for _, count in changes]
    return times, [*counts, 0]


def draw(folder: Path) -> list[Path]:
    storage = LocalStorage(folder)
    summary = read_json(storage, "summary.json")
    started = summary.get("started_at", 0.0)
    rank_steps = _records(storage, folder, "steps")  # every rank's; rank 0's carry metrics
    steps = first_rows(rank_steps)
    attempts = _records(storage, folder, "attempts")
    groups = _records(storage, folder, "groups")
    holds = _records(storage, folder, "holds")
    commits = _records(storage, folder, "commits")
    reports = _records(storage, folder, "reports")
    notices = [n for n in _records(storage, folder, "notices") if n.get("agreed")]
    schedule = _records(storage, folder, "schedule")
    cost = _records(storage, folder, "cost")
    wall = summary["wall_time_s"]
    metric = summary.get("metric")

    resizes = _records(storage, folder, "resizes")
    joins = [r for r in resizes if r.get("event") == "join"]  # survivor mode (--torchft)
    leaves = [r for r in resizes if r.get("event") == "leave"]
    if joins:
        notices = _records(storage, folder, "notices")
    first_placed = min([g["t_run"] for g in groups + joins] or [
        s["t_run"] for s in steps] or [0.0])
    left = max(0.0, first_placed - LEAD_IN_S)
    panels = 4 if cost else 3
    figure, axes = plt.subplots(panels, 1, figsize=(8, 2.3 * panels + 1), sharex=True)
    workers_axes, progress_axes, metric_axes = axes[0], axes[1], axes[2]

    times, counts = (_replicas_over_time(joins, leaves, wall) if joins
                     else _workers_over_time(attempts, holds, steps, wall))
    workers_axes.step(times, counts, where="post", color="tab:blue",
                      label="replica groups up" if joins else "workers training")
    first_steps = {a: min(s["t_run"] for s in steps if s["attempt"] == a)
                   for a in {s["attempt"] for s in steps}}
    for index, group in enumerate(groups):
        end = first_steps.get(group["group"])
        if end is None:
            later = [g["t_run"] for g in groups if g["group"] > group["group"]]
            end = min(later, default=wall)
        workers_axes.axvspan(group["t_run"], end, color="0.8", zorder=0,
                             label="worker group starting" if index == 0 else "_nolegend_")
        before = [s["t_run"] for s in steps if s["t_run"] < group["t_run"]]
        if before:  # from the previous group's last step until this one was placed
            workers_axes.axvspan(max(before), group["t_run"], color="0.93", zorder=0,
                                 label="restarting" if index == 1 else "_nolegend_")
    committed = {c["checkpoint"] for c in commits if c.get("checkpoint")}
    saved = [r for r in reports if r.get("reason") == "notice" and r.get("checkpoint")
             and r["checkpoint"] in committed]
    marks = [(notices, "tab:red", "--", "notice"),
             (saved, "tab:green", ":", "notice checkpoint (committed)"),
             ([{"t_run": t} for t in _kills(folder, started)], "black", "-",
              "spot node killed")]
    membership = [(leaves, "tab:red", "-.", "replica group left"),
                  ([j for j in joins if any(r["t_run"] <= j["t_run"] for r in leaves)],
                   "tab:green", "-", "replica group joined")]
    marks += membership
    for rows, color, style, label in marks:
        for index, row in enumerate(rows):
            workers_axes.axvline(row["t_run"], color=color, linestyle=style, linewidth=1.2,
                                 label=label if index == 0 else "_nolegend_")
    for index, row in enumerate(schedule):
        workers_axes.plot(row["t_run"], max(counts or [1]) + 0.25, "v", color="tab:purple",
                          label="scheduled preemption" if index == 0 else "_nolegend_")
    top = max(counts or [1])
    workers_axes.set(ylabel="replica groups" if joins else "workers",
                     ylim=(0, top * 1.8 + 0.5), title=_title(summary, first_placed))
    workers_axes.legend(loc="upper left", fontsize="x-small", ncol=3, framealpha=0.9)

    again = _replica_steps_again(steps, joins) if joins else _steps_again(steps)
    progress_axes.plot([s["t_run"] for s in steps], [s["step"] + 1 for s in steps], ".",
                       color="tab:blue", markersize=2, label="computed once")
    if again:
        progress_axes.plot([s["t_run"] for s in again], [s["step"] + 1 for s in again], ".",
                           color="tab:red", markersize=3, label="computed again (lost)")
    progress_axes.set(ylabel=f"{summary.get('step_unit', 'step')}s done")
    progress_axes.legend(loc="upper left", fontsize="x-small")

    segments = _metric_series(metric, rank_steps, commits)
    if segments:
        dense = sum(len(points) for points in segments) > 60
        for points in segments:  # one line per worker group: none across a restart
            metric_axes.plot([t for t, _ in points], [v for _, v in points],
                             "-" if dense and len(points) > 1 else "o-", color="tab:orange",
                             markersize=2 if dense else 3, linewidth=1)
        for rows, color, style, _ in membership:  # on the loss curve too
            for row in rows:
                metric_axes.axvline(row["t_run"], color=color, linestyle=style, linewidth=1)
    else:
        metric_axes.text(0.5, 0.5, f"no metric {metric!r} reported", ha="center",
                         va="center", transform=metric_axes.transAxes)
    metric_axes.set(ylabel=metric or "metric")

    if cost:
        cost_axes = axes[3]
        cost_axes.plot([c["t_run"] for c in cost], [c["cost"] for c in cost],
                       color="tab:green", label="this run (spot)")
        cost_axes.plot([c["t_run"] for c in cost], [c["on_demand_cost"] for c in cost],
                       color="tab:gray", linestyle="--", label="same run, all on demand")
        cost_axes.legend(loc="upper left", fontsize="x-small")
        cost_axes.set(ylabel="cost ($)")
    axes[-1].set(xlabel="time since the run began (s)", xlim=(left, wall))
    return [save_figure(figure, folder / FIGURE)]


def _steps_again(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps a later worker group computed again."""
    seen: set[int] = set()
    again: list[dict[str, Any]] = []
    for attempt in sorted({s["attempt"] for s in steps}):
        mine = [s for s in steps if s["attempt"] == attempt]
        again += [s for s in mine if s["step"] in seen]
        seen |= {s["step"] for s in mine}
    return again


def _replica_steps_again(steps: list[dict[str, Any]], joins: list[dict[str, Any]]
                         ) -> list[dict[str, Any]]:
    """Survivor mode: a step a replica group reported before (it did not commit), or one an
    earlier generation of groups had done (every group lost, resumed from a checkpoint)."""
    generation = {j["replica_group"]: j.get("generation", 0) for j in joins}
    reached: dict[int, int] = {}
    seen: set[tuple[int, int]] = set()
    again = []
    for row in sorted(steps, key=lambda r: r["t_run"]):
        mine = generation.get(row["attempt"], 0)
        key = (row["attempt"], row["step"])
        if key in seen or any(g < mine and row["step"] < done for g, done in reached.items()):
            again.append(row)
        seen.add(key)
        reached[mine] = max(reached.get(mine, 0), row["step"] + 1)
    return again


def _title(summary: dict[str, Any], first_placed: float) -> str:
    return (f"{summary.get('script', '')}: {summary['steps_done']} "
            f"{summary.get('step_unit', 'step')}s, {summary['lost_steps']} lost, "
            f"{summary['preemptions']} preemptions, {summary['notices_honoured']}/"
            f"{summary['notices']} notices honoured\n(first "
            f"{'replica' if summary.get('mode') == 'torchft' else 'worker'} group placed "
            f"{first_placed:.0f} s after the run began)")


def _metric_series(metric: str | None, steps: list[dict[str, Any]],
                   commits: list[dict[str, Any]]) -> list[list[tuple[float, float]]]:
    """The metric over time, one series per worker group (its attempt): ElasticLoop's step
    rows and the reports Ray Train committed."""
    if metric is None:
        return []
    by_group: dict[int | None, set[tuple[float, float]]] = {}
    for row in steps:
        if metric in row:
            by_group.setdefault(row["attempt"], set()).add((row["t_run"], float(row[metric])))
    for row in commits:
        value = row.get("metrics", {}).get(metric)
        if isinstance(value, int | float):
            by_group.setdefault(row["attempt"], set()).add((row["t_run"], float(value)))
    return [sorted(points) for _, points in sorted(by_group.items(),
                                                   key=lambda item: item[0] is None)]


def _replicas_over_time(joins: list[dict[str, Any]], leaves: list[dict[str, Any]],
                        wall_s: float) -> tuple[list[float], list[int]]:
    """Survivor mode: replica groups up over time, from their joins and leaves."""
    changes = sorted([(j["t_run"], 1) for j in joins] + [(r["t_run"], -1) for r in leaves])
    times, counts, count = [0.0], [0], 0
    for t, change in changes:
        count += change
        times.append(t)
        counts.append(count)
    return [*times, wall_s], [*counts, count]
