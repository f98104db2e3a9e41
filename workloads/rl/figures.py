"""The RL run's figures, drawn on the user's side from a results folder (matplotlib, Agg):
evaluation and training return vs env steps, vs wall time and vs cost, spot preemptions and
learner resumes marked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from workloads.common.figures import save_figure  # noqa: E402
from workloads.common.results import read_json, read_records  # noqa: E402
from workloads.common.storage import LocalStorage  # noqa: E402

AXES = (("env_steps", "env steps", "reward_vs_steps.png"),
        ("t", "wall time (s)", "reward_vs_time.png"),
        ("cost", "cost ($, the run's nodes)", "reward_vs_cost.png"))


def _points(rows: list[dict[str, Any]], x: str, y: str) -> tuple[list[float], list[float]]:
    kept = [row for row in rows if row.get(y) is not None
            and (y != "eval_return" or row.get("eval_episodes", 0) > 0)]
    return [row[x] for row in kept], [row[y] for row in kept]


def draw(folder: Path) -> list[Path]:
    """The figures of the run in `folder`; returns their paths."""
    storage = LocalStorage(folder)
    summary = read_json(storage, "summary.json")
    iterations = read_records(storage, "iterations")
    preemptions = read_records(storage, "preemptions")
    resumes = [row for previous, row in zip(iterations, iterations[1:], strict=False)
               if row["learner_resumes"] > previous["learner_resumes"]]
    drawn = []
    for x, label, name in AXES:
        figure, axes = plt.subplots(figsize=(7, 4))
        axes.plot(*_points(iterations, x, "train_return"), color="0.6", lw=1,
                  label="training episodes (mean)")
        axes.plot(*_points(iterations, x, "eval_return"), "o-", color="C0", ms=3,
                  label="evaluation (deterministic)")
        for i, row in enumerate(preemptions):
            axes.axvline(row[x], color="C3", ls="--", lw=1,
                         label="spot node preempted" if i == 0 else None)
        for i, row in enumerate(resumes):
            axes.axvline(row[x], color="C1", ls=":", lw=1.5,
                         label="learner resumed" if i == 0 else None)
        axes.set_xlabel(label)
        axes.set_ylabel("episode return")
        axes.set_title(f"SAC on {summary['env']}: {summary['env_runners']} env runners, "
                       f"{summary['preemptions']} preemptions, "
                       f"{summary.get('env_runners_replaced', 0)} runners replaced", fontsize=9)
        axes.legend(fontsize=8, loc="lower right")
        drawn.append(save_figure(figure, folder / name))
    return drawn
