"""docs/burst.md stays true: every command it shows is a task (or the benchmark) with those
flags, and every run it shows is run, exactly as written, by an acceptance test."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest
from invoke import Task

import tasks
from launch.stack_config import PROJECT_DIR

DOC = (PROJECT_DIR / "docs" / "burst.md").read_text()
RUNS = re.compile(r"^invoke (run|sweep)-")


def _commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", DOC, flags=re.DOTALL)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def _flags(words: list[str]) -> set[str]:
    return {word.split("=")[0] for word in words if word.startswith("-")}


def test_every_invoke_command_shown_is_a_task_with_those_flags() -> None:
    found = {name.replace("_", "-"): task for name, task in vars(tasks).items()
             if isinstance(task, Task)}
    shown = [shlex.split(line) for line in _commands() if line.startswith("invoke ")]
    assert len(shown) >= 2
    for words in shown:
        task = found[words[1]]
        flags = {f"--{name.replace('_', '-')}" for name in task.help or {}}
        assert _flags(words[2:]) <= flags, words


def test_every_run_shown_is_run_by_an_acceptance_test_exactly_as_written() -> None:
    acceptance = "".join(path.read_text()
                         for path in (PROJECT_DIR / "tests" / "acceptance").glob("*.py"))
    runs = [line for line in _commands() if RUNS.match(line)]
    assert runs == ["invoke run-burst --bw 100"]  # few: each one costs CI minutes
    for line in runs:
        assert f'"{line}"' in acceptance, line


@pytest.mark.subprocess
def test_the_benchmark_commands_shown_use_only_its_flags() -> None:
    shown = [shlex.split(line) for line in _commands() if line.startswith("python -m benchmarks.")]
    assert shown
    for words in shown:
        done = subprocess.run([sys.executable, "-m", words[2], "--help"], cwd=PROJECT_DIR,
                              capture_output=True, text=True, timeout=120, check=True)
        assert _flags(words[3:]) <= set(re.findall(r"--[a-z][a-z-]*", done.stdout)), words
