"""The run's figure, drawn on the user's side from a results folder (matplotlib, Agg):
workers and loss over time, notices, checkpoints and restarts marked; test accuracy."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from workloads.common.figures import save_figure  # noqa: E402
from workloads.common.results import read_json, read_records  # noqa: E402
from workloads.common.storage import LocalStorage  # noqa: E402


def draw(folder: Path) -> list[Path]:
    storage = LocalStorage(folder)
    summary = read_json(storage, "summary.json")
    steps = read_records(storage, "steps")
    attempts = read_records(storage, "attempts")
    notices = [n for n in read_records(storage, "notices") if n.get("agreed")]
    checkpoints = read_records(storage, "checkpoints")

    figure, (workers_axes, loss_axes) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True)
    # workers training: each group's size from its start, none from a hold to the restart
    # (or to the hold's expiry)
    size = {a["attempt"]: a["world_size"] for a in attempts}
    changes = sorted([(a["t_run"], a["world_size"]) for a in attempts]
                     + [(h["t_run"], size[h["attempt"]] if h.get("expired") else 0)
                        for h in read_records(storage, "holds")])
    times = [t for t, _ in changes] + [summary["wall_time_s"]]
    counts = [count for _, count in changes]
    workers_axes.step(times, [*counts, counts[-1] if counts else 0], where="post",
                      color="tab:blue")
    workers_axes.set(ylabel="workers training", ylim=(0, max(counts or [1]) + 0.5),
                     title=f"{summary['script']}: {summary['steps_done']} steps, "
                           f"lost {summary['lost_steps']}, {summary['preemptions']} preemptions")
    loss_axes.plot([s["t_run"] for s in steps], [s["loss"] for s in steps], ".",
                   markersize=2, color="tab:gray", label="loss")
    loss_axes.set(xlabel="time since start (s)", ylabel="training loss", yscale="log")
    for axes in (workers_axes, loss_axes):
        for index, notice in enumerate(notices):
            axes.axvline(notice["t_run"], color="tab:red", linestyle="--",
                         label="notice" if index == 0 else "_nolegend_")
        for index, row in enumerate(c for c in checkpoints if c["reason"] == "notice"):
            axes.axvline(row["t_run"], color="tab:green", linestyle=":",
                         label="notice checkpoint" if index == 0 else "_nolegend_")
    evaluated = [s for s in steps if "test_accuracy" in s]
    if evaluated:
        accuracy_axes = loss_axes.twinx()
        accuracy_axes.plot([s["t_run"] for s in evaluated],
                           [s["test_accuracy"] for s in evaluated], "o-", color="tab:orange",
                           label="test accuracy")
        accuracy_axes.set(ylabel="test accuracy", ylim=(0, 1))
        accuracy_axes.legend(loc="center right")
    workers_axes.legend(loc="lower left")
    loss_axes.legend(loc="upper right")
    return [save_figure(figure, folder / "workers_loss.png")]
