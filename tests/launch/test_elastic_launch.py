"""`invoke run-elastic` before anything starts: the seed's short flags, the script's argv
after `--`, the command line handed to the target, the working dir that travels with the
code, and bad input ending the task with one line naming the flag."""

from __future__ import annotations

from pathlib import Path

import pytest
from invoke import Context, Exit

import tasks
from launch.elastic import elastic_run
from launch.working_dir import staged_working_dir
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


@pytest.mark.parametrize(("given", "flag"), [
    ({"script": "no/such/train.py"}, "--script"),
    ({"min_workers": "3", "max_workers": "2"}, "--min-workers"),
    ({"spot": "99"}, "--spot"),
])
def test_bad_input_ends_the_task_with_one_line(given: dict[str, str], flag: str) -> None:
    with pytest.raises(Exit) as ended:
        tasks.run_elastic(Context(), **given)
    message = str(ended.value.message)
    assert ended.value.code == 2 and message.startswith(f"error: {flag}")
    assert "\n" not in message
