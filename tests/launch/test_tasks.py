"""The command line: every task and flag documented, clear failure without the Pulumi CLI."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

from invoke import Task

import tasks

PROJECT_DIR = Path(__file__).resolve().parents[2]
INVOKE = [sys.executable, "-m", "invoke"]


def _tasks() -> dict[str, Task]:
    return {name: obj for name, obj in vars(tasks).items() if isinstance(obj, Task)}


def test_every_task_has_a_summary_and_help_for_every_flag() -> None:
    found = _tasks()
    assert {"plan", "preview", "up", "destroy", "outputs", "test"} <= set(found)
    for name, task in found.items():
        assert (task.__doc__ or "").strip(), f"task {name} has no docstring"
        flags = [p for p in inspect.signature(task.body).parameters if p != "c"]
        missing = [flag for flag in flags if flag not in (task.help or {})]
        assert not missing, f"task {name}: flags without help: {missing}"


def test_invoke_list_shows_every_task() -> None:
    listing = subprocess.run(
        [*INVOKE, "--list"], cwd=PROJECT_DIR, capture_output=True, text=True, check=True
    ).stdout
    for name in _tasks():
        assert f"  {name.replace('_', '-')} " in listing


def test_pulumi_tasks_without_the_cli_print_one_line_and_fail(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # nothing named pulumi on it
    for command in (["up", "--yes"], ["preview"], ["destroy"], ["outputs"]):
        done = subprocess.run(
            [*INVOKE, *command], cwd=PROJECT_DIR, env=env, capture_output=True, text=True
        )
        assert done.returncode != 0
        assert done.stderr.strip().count("\n") == 0, done.stderr
        assert "Pulumi CLI is not installed" in done.stderr
