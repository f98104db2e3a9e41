"""The run's figure, drawn on the user's side from a results folder (matplotlib, Agg): workers
over time with notices, notice checkpoints and node deaths marked; test accuracy over time;
cost over time next to the same run all on demand (when the run was priced)."""

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

FIGURE = "workers_accuracy_cost.png"
LAB_EVENTS = Path("spotlab") / "events.jsonl"


def _optional_records(storage: LocalStorage, folder: Path, name: str) -> list[dict[str, Any]]:
    return read_records(storage, name) if (folder / "records" / f"{name}.jsonl").is_file() else []


def _deaths(folder: Path, started: float) -> list[float]:
    """When a spot node of the lab was killed at its deadline (run seconds)."""
    path = folder / LAB_EVENTS
    if not path.is_file():
        return []
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e["t"] - started for e in events if e["event"] == "kill"]


def _workers_over_time(storage: LocalStorage, wall_s: float) -> tuple[list[float], list[int]]:
    """Each group's size from its start, none from a hold to the restart (or to the hold's
    expiry)."""
    attempts = read_records(storage, "attempts")
    size = {a["attempt"]: a["world_size"] for a in attempts}
    changes = sorted([(a["t_run"], a["world_size"]) for a in attempts]
                     + [(h["t_run"], size[h["attempt"]] if h.get("expired") else 0)
                        for h in read_records(storage, "holds")])
    counts = [count for _, count in changes]
    return [t for t, _ in changes] + [wall_s], [*counts, counts[-1] if counts else 0]


def draw(folder: Path) -> list[Path]:
    storage = LocalStorage(folder)
    summary = read_json(storage, "summary.json")
    steps = read_records(storage, "steps")
    notices = [n for n in read_records(storage, "notices") if n.get("agreed")]
    saved = [c for c in read_records(storage, "checkpoints") if c["reason"] == "notice"]
    deaths = _deaths(folder, summary.get("started_at", 0.0))
    cost = _optional_records(storage, folder, "cost")

    figure, (workers_axes, accuracy_axes, cost_axes) = plt.subplots(
        3, 1, figsize=(7, 7.5), sharex=True)
    times, counts = _workers_over_time(storage, summary["wall_time_s"])
    workers_axes.step(times, counts, where="post", color="tab:blue", label="workers training")
    workers_axes.set(ylabel="workers", ylim=(0, max(counts or [1]) + 0.5),
                     title=f"{summary['script']}: {summary['steps_done']} steps, lost "
                           f"{summary['lost_steps']}, {summary['preemptions']} preemptions, "
                           f"{summary['notices_honoured']}/{summary['notices']} notices honoured")
    marks = [(notices, "tab:red", "--", "notice"),
             (saved, "tab:green", ":", "notice checkpoint")]
    for rows, color, style, label in marks:
        for index, row in enumerate(rows):
            workers_axes.axvline(row["t_run"], color=color, linestyle=style,
                                 label=label if index == 0 else "_nolegend_")
    for index, at in enumerate(deaths):
        workers_axes.axvline(at, color="black", linewidth=1.5,
                             label="spot node killed" if index == 0 else "_nolegend_")
    workers_axes.legend(loc="lower left", fontsize="small")

    evaluated = [s for s in steps if "test_accuracy" in s]
    accuracy_axes.plot([s["t_run"] for s in evaluated], [s["test_accuracy"] for s in evaluated],
                       "o-", color="tab:orange", markersize=3)
    accuracy_axes.set(ylabel="test accuracy", ylim=(0, 1))

    if cost:
        cost_axes.plot([c["t_run"] for c in cost], [c["cost"] for c in cost],
                       color="tab:green", label="this run (spot)")
        cost_axes.plot([c["t_run"] for c in cost], [c["on_demand_cost"] for c in cost],
                       color="tab:gray", linestyle="--", label="same run, all on demand")
        cost_axes.legend(loc="upper left", fontsize="small")
    else:
        cost_axes.text(0.5, 0.5, "not priced (no spot lab record)", ha="center",
                       va="center", transform=cost_axes.transAxes)
    cost_axes.set(xlabel="time since start (s)", ylabel="cost ($)")
    return [save_figure(figure, folder / FIGURE)]
