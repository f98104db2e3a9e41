"""`invoke run-elastic` before anything starts: the seed's short flags, the script's argv
after `--`, the command line handed to the target, the working dir that travels with the
code, and bad input ending the task with one line naming the flag; after the run: the cost
and the figure made from the results folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from invoke import Context, Exit

import tasks
from launch.elastic import elastic_run, price_results
from launch.targets import LAB_RECORD
from launch.working_dir import staged_working_dir
from spotlab.config import SpotLabConfig
from workloads.elastic.figures import FIGURE, draw
from workloads.elastic.options import ELASTIC_SPEC, ElasticOptions, split_command_line


def test_short_flags_reach_the_task() -> None:
    # invoke's get_arguments() pops each flag's help off the task (its CLI loads tasks anew
    # per run); give it back so later tests see the task as the CLI would
    saved_help = dict(tasks.run_elastic.help)
    try:
        names = {tuple(argument.names) for argument in tasks.run_elastic.get_arguments()}
    finally:
        tasks.run_elastic.help.update(saved_help)
    assert {("script", "f"), ("working-dir", "d"), ("max-workers", "m")} <= names


def test_working_dir_travels_whole_and_the_script_is_named_inside_it(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "train.py").write_text("import helper\ndef train_loop_per_worker(c): pass\n")
    (project / "helper.py").write_text("X = 1\n")
    (project / ".git").mkdir()
    options = ELASTIC_SPEC.parse(split_command_line(
        ["-d", str(project), "-f", "train.py", "-m", "3", "--", "--steps", "7"]))
    run = elastic_run(options)
    assert run.inputs == {"--working-dir": project}
    with staged_working_dir(tmp_path, run.inputs) as (folder, inputs):
        staged = folder / inputs["--working-dir"]
        assert sorted(p.name for p in staged.iterdir()) == ["helper.py", "pkg", "train.py"]
        command = run.command("out", "spotlab:x", inputs)
    again = ELASTIC_SPEC.parse(split_command_line(command[2:]))
    assert again.working_dir == Path(inputs["--working-dir"])
    assert again.script == Path("train.py") and again.max_workers == 3
    assert again.argv == ["--steps", "7"] and again.target == "spotlab:x"


def test_script_alone_travels_without_a_working_dir() -> None:
    run = elastic_run(ElasticOptions())
    assert list(run.inputs) == ["--script"] and run.inputs["--script"].name == "digits_cnn.py"


def test_the_lab_flags_keep_their_rules_and_the_help_states_elastic_own_pace() -> None:
    """run-elastic's lab steps its chain every 0.5 s, not at the paper's 2 s / 20 (0.1 s):
    its --refresh help says so, with the lab's flags and rules unchanged."""
    from launch.options import ELASTIC_LAB_SPEC
    from spotlab.options import LAB_SPEC

    assert [o.flag for o in ELASTIC_LAB_SPEC.options] == [o.flag for o in LAB_SPEC.options]
    lab = ELASTIC_LAB_SPEC.default().config()
    assert (lab.alpha, lab.refresh_s) == (1.0, 0.5)
    assert ELASTIC_LAB_SPEC.from_text({"refresh": "0.2"}).config().refresh_s == 0.2
    with pytest.raises(ValueError, match="--refresh"):
        ELASTIC_LAB_SPEC.from_text({"refresh": "0"})
    [refresh] = [o for o in ELASTIC_LAB_SPEC.options if o.name == "refresh"]
    assert refresh.help_text().endswith("(default: 0.5)")
    assert "paper" not in refresh.help_text() and "restart" in refresh.help_text()


@pytest.mark.parametrize(("given", "flag"), [
    ({"script": "no/such/train.py"}, "--script"),
    ({"function": "nope"}, "--function"),  # the shipped script defines no such function
    ({"min_workers": "3", "max_workers": "2"}, "--min-workers"),
    ({"spot": "99"}, "--spot"),
    ({"cpus": "2"}, "--cpus"),  # the lab's nodes offer 1 CPU each
    ({"min_workers": "9", "max_workers": "9"}, "--min-workers"),  # 4 nodes of 1 CPU
    ({"gpus": "1"}, "--gpus"),
])
def test_bad_input_ends_the_task_with_one_line(given: dict[str, str], flag: str) -> None:
    with pytest.raises(Exit) as ended:
        tasks.run_elastic(Context(), **given)
    message = str(ended.value.message)
    assert ended.value.code == 2 and message.startswith(f"error: {flag}")
    assert "\n" not in message


def test_a_run_the_lab_cannot_hold_starts_nothing(tmp_path: Path) -> None:
    """Refused before a lab is started: no results folder is made."""
    out = tmp_path / "results"
    with pytest.raises(Exit) as ended:
        tasks.run_elastic(Context(), cpus="1.5", out=str(out))
    assert ended.value.code == 2 and "--cpus-per-node" in str(ended.value.message)
    assert not out.exists()


def test_a_lab_run_is_priced_and_drawn_from_its_results_folder(tmp_path: Path) -> None:
    """What the launcher does after the job: cost from the lab record into summary.json and
    records/cost.jsonl (with the preemptions it carried out), then the figure (workers,
    progress, the metric, cost)."""
    t0 = 1000.0
    lab = SpotLabConfig(spot=1, on_demand=1)
    rows: dict[str, list[dict[str, Any]]] = {
        "groups": [{"group": 0, "t": t0 + 0.5, "world_size": 2, "nodes": ["a", "b"]},
                   {"group": 1, "t": t0 + 25, "world_size": 1, "nodes": ["a"]}],
        "attempts": [{"attempt": 0, "t": t0 + 1, "world_size": 2},
                     {"attempt": 1, "t": t0 + 30, "world_size": 1}],
        "steps": [{"attempt": int(s >= 10), "rank": 0, "step": s, "t": t0 + 2 + s,
                   "kind": "step", "world_size": 2 - int(s >= 10), "loss": 1.0 / (s + 1),
                   **({"test_accuracy": 0.5 + s / 50} if s % 5 == 4 else {})}
                  for s in range(20)],
        "notices": [{"attempt": 0, "agreed": True, "t": t0 + 11.5}],
        "reports": [{"attempt": 0, "rank": 0, "steps_covered": 10, "checkpoint": "ck/10",
                     "reason": "notice", "t": t0 + 12}],
        "commits": [{"attempt": 0, "checkpoint": "ck/10", "metrics": {"loss": 0.1},
                     "t": t0 + 12.4}],
        "holds": [{"attempt": 0, "step": 9, "t": t0 + 12, "reason": "notice"}],
        "schedule": [{"point": "8s", "t": t0 + 10.5}],
    }
    for name, records in rows.items():
        (tmp_path / "records").mkdir(exist_ok=True)
        (tmp_path / "records" / f"{name}.jsonl").write_text("".join(
            json.dumps({**row, "t_run": row["t"] - t0}) + "\n" for row in records))
    summary = {"script": "digits_cnn.py", "steps_done": 20, "lost_steps": 0, "preemptions": 1,
               "notices": 1, "notices_honoured": 1, "started_at": t0, "ended_at": t0 + 40,
               "wall_time_s": 40.0, "metric": "test_accuracy", "step_unit": "step"}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    (tmp_path / LAB_RECORD).mkdir()
    (tmp_path / LAB_RECORD / "config.json").write_text(json.dumps(lab.to_dict()))
    events = [{"t": t0 - 5, "event": "join", "node": name, "slot": slot}
              for name, slot in (("head", None), ("od-0", None), ("spot-0", 0))]
    events += [{"t": t0 + 11, "event": "notice", "node": "spot-0", "slot": 0},
               {"t": t0 + 17, "event": "kill", "node": "spot-0", "slot": 0}]
    (tmp_path / LAB_RECORD / "events.jsonl").write_text(
        "".join(json.dumps(event) + "\n" for event in events))

    carried = [{"index": 1, "point": "8s", "node": "spot-0", "t": 10.6}]
    priced = price_results(tmp_path, {"preemptions_carried_out": carried})
    assert priced is not None
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["cost"] == priced and 0 < priced["cost_usd"] < priced["all_on_demand_cost_usd"]
    assert written["preemptions_carried_out"] == carried
    assert priced["spot_up_node_s"] == pytest.approx(17.0)
    assert (tmp_path / "records" / "cost.jsonl").read_text().count("\n") >= 3
    [figure] = draw(tmp_path)
    assert figure.name == FIGURE and figure.stat().st_size > 10_000
    (tmp_path / LAB_RECORD / "config.json").unlink()
    assert price_results(tmp_path) is None  # no lab record: nothing priced


@pytest.mark.parametrize("steps_per_group", [4, 200])  # a short run, a long one
def test_the_metric_is_drawn_with_no_line_across_a_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps_per_group: int) -> None:
    """Two worker groups with a 20 s restart between them, when no step ran: the metric's
    lines stay within a group, and show each step's loss (rank 0's row carries it, also
    when another rank recorded the step first) and the committed report's."""
    import matplotlib.pyplot as plt

    from workloads.elastic import figures

    drawn: list[Any] = []

    def keep(figure: Any, path: Path) -> Path:
        drawn.append(figure)
        return path

    monkeypatch.setattr(figures, "save_figure", keep)
    pace = 10.0 / steps_per_group
    rank_0 = [{"attempt": int(s >= steps_per_group), "rank": 0, "step": s,
               "t_run": 2.0 + s * pace + 20.0 * int(s >= steps_per_group), "world_size": 2,
               "loss": 1.0 / (s + 1)} for s in range(2 * steps_per_group)]
    rank_1 = [{**{key: value for key, value in row.items() if key != "loss"}, "rank": 1,
               "t_run": row["t_run"] - 0.01 * (row["step"] % 2)} for row in rank_0]
    rows: dict[str, list[dict[str, Any]]] = {
        "attempts": [{"attempt": 0, "world_size": 2, "t_run": 1.0},
                     {"attempt": 1, "world_size": 1, "t_run": 28.0}],
        "steps": rank_0 + rank_1,
        "commits": [{"attempt": 0, "checkpoint": "ck", "metrics": {"loss": 0.3}, "t_run": 12.5}],
    }
    (tmp_path / "records").mkdir()
    for name, records in rows.items():
        (tmp_path / "records" / f"{name}.jsonl").write_text(
            "".join(json.dumps({**row, "t": row["t_run"]}) + "\n" for row in records))
    (tmp_path / "summary.json").write_text(json.dumps({
        "steps_done": 2 * steps_per_group, "lost_steps": 0, "preemptions": 1, "notices": 1,
        "notices_honoured": 1, "started_at": 0.0, "wall_time_s": 45.0, "metric": "loss"}))
    draw(tmp_path)
    [figure] = drawn
    lines = [line for line in figure.axes[2].get_lines() if len(line.get_xdata()) > 0]
    assert len(lines) == 2  # one per group
    last_of_first_group = 12.5  # its committed report, after its last step
    for line in lines:
        xs = list(line.get_xdata())
        assert xs == sorted(xs)
        assert xs[-1] <= last_of_first_group or xs[0] >= 22.0
    assert sum(len(line.get_xdata()) for line in lines) == 2 * steps_per_group + 1
    plt.close(figure)
