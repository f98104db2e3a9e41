"""The RL figures read well for a one-minute and a one-hour run: drawn from synthetic records
shaped as a run writes them (summary.json, records/*.jsonl, rewards.jsonl)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.lines import Line2D

from workloads.rl.figures import FIGURES, RunRecords, draw, reward_figure, time_unit


def synthetic_run(folder: Path, *, wall_s: float, iterations: int, evaluate_every: int,
                  preempt_at: list[int], resume_at: tuple[int, ...] = ()) -> Path:
    """A run's folder: `iterations` rows evenly over `wall_s`, 100 env steps each, returns
    rising from -1500 to -150, an evaluation every `evaluate_every` iterations and a final
    one, preemptions after the iterations `preempt_at` (a runner out of service for the
    next iteration), learner resumes at `resume_at`."""
    rows: list[dict[str, Any]] = []
    rewards: list[dict[str, Any]] = []
    preemptions: list[dict[str, Any]] = []
    resumes = 0
    for i in range(1, iterations + 1):
        resumes += i in resume_at
        rows.append({"iteration": i, "env_steps": 100 * i, "t": wall_s * i / iterations,
                     "cost": 0.0001 * i, "train_return": -1500 + 1350 * i / iterations,
                     "eval_episodes": 0, "eval_return": None, "evaluations": [],
                     "healthy_runners": 1 if i - 1 in preempt_at else 2, "runners": 2,
                     "learner_resumes": resumes})
        if i % evaluate_every == 0:
            rewards.append({"iteration": i, "env_steps": 100 * i, "t": wall_s * i / iterations,
                            "return": -1400 + 1300 * i / iterations, "final": False})
        if i in preempt_at:
            preemptions.append({"iteration": i, "env_steps": 100 * i,
                                "t": wall_s * i / iterations, "cost": 0.0001 * i})
    rewards += [{"iteration": iterations, "env_steps": 100 * iterations, "t": wall_s,
                 "return": value, "final": True} for value in (-140.0, -160.0)]
    summary = {"env": "Pendulum-v1", "env_runners": 2, "env_steps": 100 * iterations,
               "wall_time_s": wall_s + 2.0, "cost": 0.0001 * iterations,
               "preemptions": len(preempt_at), "learner_resumes": len(resume_at)}
    (folder / "records").mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(summary))
    for name, lines in (("records/iterations.jsonl", rows),
                        ("records/preemptions.jsonl", preemptions), ("rewards.jsonl", rewards)):
        (folder / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def _data(line: Line2D, axis: str) -> list[float]:
    return [float(value) for value in np.asarray(
        line.get_xdata() if axis == "x" else line.get_ydata(), dtype=float)]


def _lines(figure: Any, label: str) -> list[Line2D]:
    return [line for line in figure.axes[0].get_lines() if line.get_label() == label]


@pytest.fixture
def minute(tmp_path: Path) -> RunRecords:
    return RunRecords.read(synthetic_run(tmp_path / "minute", wall_s=60.0, iterations=6,
                                         evaluate_every=4, preempt_at=[3]))


@pytest.fixture
def hour(tmp_path: Path) -> RunRecords:
    return RunRecords.read(synthetic_run(tmp_path / "hour", wall_s=3600.0, iterations=2000,
                                         evaluate_every=5, preempt_at=list(range(40, 2000, 40)),
                                         resume_at=(1000,)))


@pytest.fixture(autouse=True)
def _close_figures() -> Any:
    yield
    plt.close("all")


def test_time_axis_units_read_well() -> None:
    assert time_unit(60) == (1.0, "s")
    assert time_unit(3600) == (60.0, "min")
    assert time_unit(10 * 3600) == (3600.0, "h")


def test_a_one_minute_run_spans_its_whole_run_with_its_final_evaluation(
        minute: RunRecords) -> None:
    for x, end in (("env_steps", 600.0), ("t", 62.0), ("cost", 0.0006)):
        figure = reward_figure(minute, x)
        low, high = figure.axes[0].get_xlim()
        assert low == 0.0 and end <= high <= end * 1.05  # not zoomed onto one point
        [final] = _lines(figure, "final evaluation: -150.0")
        assert _data(final, "x")[0] == pytest.approx(end)
        [periodic] = _lines(figure, "evaluation (deterministic, one per runner)")
        assert len(_data(periodic, "x")) == 1
        assert len(_lines(figure, "spot node preempted")) == 1
    assert reward_figure(minute, "t").axes[1].get_xlabel() == "wall time (s)"
    [runners] = [line for line in reward_figure(minute, "env_steps").axes[1].get_lines()
                 if line.get_label() == "env runners in service"]
    assert min(_data(runners, "y")) == 1 and max(_data(runners, "y")) == 2


def test_a_one_hour_run_is_drawn_in_minutes_with_every_mark(hour: RunRecords) -> None:
    figure = reward_figure(hour, "t")
    assert figure.axes[1].get_xlabel() == "wall time (min)"
    low, high = figure.axes[0].get_xlim()
    assert low == 0.0 and 60.0 <= high <= 63.5
    preempted = [line for line in figure.axes[0].get_lines()
                 if line.get_linestyle() == "--"]
    assert len(preempted) == 49 and all((line.get_alpha() or 1.0) < 0.5 for line in preempted)
    assert len(_lines(figure, "learner resumed")) == 1
    [periodic] = _lines(figure, "evaluation (deterministic, one per runner)")
    assert len(_data(periodic, "x")) == 400
    [final] = _lines(figure, "final evaluation: -150.0")
    assert _data(final, "x")[0] == pytest.approx(3602.0 / 60)


def test_runners_in_service_follow_the_learners_runner_events(minute: RunRecords) -> None:
    minute.runner_events = [{"event": "lost", "runner": 2, "t": 31.0},
                            {"event": "back", "runner": 2, "t": 44.0},
                            {"event": "sampling", "runner": 2, "t": 45.0}]
    assert minute.in_service() == ([0.0, 31.0, 44.0, 62.0], [2, 1, 2, 2])
    figure = reward_figure(minute, "env_steps")
    [runners] = [line for line in figure.axes[1].get_lines()
                 if line.get_label() == "env runners in service"]
    # at 31 s, between iteration 3 (30 s, 300 steps) and 4 (40 s, 400 steps)
    assert _data(runners, "x") == pytest.approx([0.0, 310.0, 440.0, 600.0])
    assert _data(runners, "y") == [2, 1, 2, 2]


def test_draw_writes_the_three_figures(tmp_path: Path) -> None:
    folder = synthetic_run(tmp_path / "run", wall_s=60.0, iterations=6, evaluate_every=4,
                           preempt_at=[3])
    drawn = draw(folder)
    assert [path.name for path in drawn] == list(FIGURES.values())
    assert all(path.stat().st_size > 10_000 for path in drawn)
