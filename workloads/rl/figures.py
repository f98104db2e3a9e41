"""The RL run's figures, drawn on the user's side from a results folder (matplotlib, Agg):
the training and evaluation returns against env steps, wall time and cost, with the spot
preemptions and learner resumes marked and the final evaluation plotted; under each, the env
runners in service. The x axis always spans the whole run from 0, in units that read well
for a one-minute and a one-hour run alike."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from workloads.common.figures import save_figure  # noqa: E402
from workloads.common.results import read_json, read_records  # noqa: E402
from workloads.common.storage import LocalStorage  # noqa: E402

REWARDS_FILE = "rewards.jsonl"
FIGURES = {"env_steps": "reward_vs_steps.png", "t": "reward_vs_time.png",
           "cost": "reward_vs_cost.png"}
MANY_MARKS = 30
"""With more preemptions than this, their lines are drawn fainter (a long run has many)."""


@dataclass
class RunRecords:
    """What the figures are drawn from: the summary, one row per iteration, the preemptions
    and the evaluations (rewards.jsonl; `final` marks the last one)."""

    summary: dict[str, Any]
    iterations: list[dict[str, Any]]
    preemptions: list[dict[str, Any]] = field(default_factory=list)
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    runner_events: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def read(cls, folder: Path) -> RunRecords:
        storage = LocalStorage(folder)
        rewards = folder / REWARDS_FILE
        return cls(
            summary=read_json(storage, "summary.json"),
            iterations=read_records(storage, "iterations"),
            preemptions=read_records(storage, "preemptions"),
            runner_events=read_records(storage, "runner_events")
            if (folder / "records" / "runner_events.jsonl").exists() else [],
            evaluations=[json.loads(line) for line in rewards.read_text().splitlines()
                         if line.strip()] if rewards.exists() else [],
        )

    def end(self, x: str) -> float:
        """Where the run ends on axis `x` (its final evaluation is drawn there)."""
        summary_key = {"env_steps": "env_steps", "t": "wall_time_s", "cost": "cost"}[x]
        last = self.iterations[-1][x] if self.iterations else 0.0
        return float(max(self.summary.get(summary_key) or 0.0, last))

    def at(self, t: float, x: str) -> float:
        """Where wall time `t` (s since the run started) falls on axis `x`, between the
        iterations around it."""
        if x == "t":
            return t
        times = [0.0, *(row["t"] for row in self.iterations)]
        values = [0.0, *(row[x] for row in self.iterations)]
        return float(np.interp(t, times, values))

    def in_service(self) -> tuple[list[float], list[int]]:
        """The env runners in service over wall time, from the learner's runner events
        (each iteration's count when the run has none)."""
        runners = int(self.summary["env_runners"])
        if not self.runner_events:  # each iteration's count, over that iteration
            counts = [row["healthy_runners"] for row in self.iterations] or [runners]
            return ([0.0, *(row["t"] for row in self.iterations)], [*counts, counts[-1]])
        times, counts = [0.0], [runners]
        for event in sorted(self.runner_events, key=lambda event: event["t"]):
            change = {"lost": -1, "back": 1}.get(event["event"])
            if change is not None:
                times.append(event["t"])
                counts.append(min(runners, max(0, counts[-1] + change)))
        times.append(self.end("t"))
        counts.append(counts[-1])
        return times, counts

    def resumes(self) -> list[dict[str, Any]]:
        """The first iteration of each resumed learner."""
        return [row for previous, row in zip(self.iterations, self.iterations[1:],
                                             strict=False)
                if row["learner_resumes"] > previous["learner_resumes"]]


def time_unit(seconds: float) -> tuple[float, str]:
    """Divisor and name of the wall-time axis: seconds up to 5 minutes, minutes up to 5
    hours, hours beyond."""
    if seconds <= 300:
        return 1.0, "s"
    if seconds <= 5 * 3600:
        return 60.0, "min"
    return 3600.0, "h"


def _evaluation_x(records: RunRecords, evaluation: dict[str, Any], x: str) -> float | None:
    """Where an evaluation (a line of rewards.jsonl) goes on axis `x`: at its iteration's
    row (the final one at the run's end)."""
    if evaluation.get("final"):
        return records.end(x)
    if x in evaluation and x != "cost":
        return float(evaluation[x])
    rows = [row for row in records.iterations if row["iteration"] == evaluation["iteration"]]
    return float(rows[-1][x]) if rows else None


def reward_figure(records: RunRecords, x: str) -> plt.Figure:
    """One figure: returns against `x` (env_steps, t or cost) and runners in service."""
    scale, unit = (time_unit(records.end("t")) if x == "t" else (1.0, ""))
    label = {"env_steps": "env steps", "t": f"wall time ({unit})",
             "cost": "cost ($, the run's nodes)"}[x]
    figure, (axes, runners) = plt.subplots(
        2, 1, figsize=(8, 5), sharex=True, gridspec_kw={"height_ratios": [4, 1]})
    rows = records.iterations

    trained = [row for row in rows if row.get("train_return") is not None]
    axes.plot([row[x] / scale for row in trained], [row["train_return"] for row in trained],
              color="0.6", lw=1, label="training episodes (mean per iteration)")
    periodic = [(where, e["return"]) for e in records.evaluations if not e.get("final")
                if (where := _evaluation_x(records, e, x)) is not None]
    if periodic:
        axes.plot([p / scale for p, _ in periodic], [r for _, r in periodic], "o",
                  color="C0", ms=3 if len(periodic) < 200 else 1.5, alpha=0.8,
                  label="evaluation (deterministic, one per runner)")
    final = [e for e in records.evaluations if e.get("final")]
    if final:
        mean = sum(e["return"] for e in final) / len(final)
        axes.plot([records.end(x) / scale], [mean], "*", color="C2", ms=14, mec="k",
                  label=f"final evaluation: {mean:.1f}")
    faint = len(records.preemptions) > MANY_MARKS
    for i, row in enumerate(records.preemptions):
        for target in (axes, runners):
            target.axvline(row[x] / scale, color="C3", ls="--", lw=0.6 if faint else 1,
                           alpha=0.4 if faint else 0.8,
                           label="spot node preempted" if i == 0 and target is axes else None)
    for i, row in enumerate(records.resumes()):
        for target in (axes, runners):
            target.axvline(row[x] / scale, color="C1", ls=":", lw=1.8,
                           label="learner resumed" if i == 0 and target is axes else None)
    axes.set_ylabel("episode return")
    summary = records.summary
    axes.set_title(f"SAC on {summary['env']}: {summary['env_runners']} env runners, "
                   f"{summary['preemptions']} preemptions, "
                   f"{summary.get('learner_resumes', 0)} learner resumes", fontsize=9)
    axes.legend(fontsize=7, loc="best")
    axes.grid(alpha=0.3)

    times, counts = records.in_service()
    runners.step([records.at(t, x) / scale for t in times], counts, where="post", color="C0",
                 lw=1, label="env runners in service")
    runners.set_ylim(-0.2, summary["env_runners"] + 0.5)
    runners.set_yticks(sorted({0, summary["env_runners"]}))
    runners.set_ylabel("runners\nin service", fontsize=7)
    runners.set_xlabel(label)
    end = records.end(x) / scale
    axes.set_xlim(0.0, end * 1.03 if end > 0 else 1.0)
    return figure


def draw(folder: Path) -> list[Path]:
    """The figures of the run in `folder`; returns their paths."""
    records = RunRecords.read(folder)
    return [save_figure(reward_figure(records, x), folder / name)
            for x, name in FIGURES.items()]
