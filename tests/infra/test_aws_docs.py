"""docs/aws.md stays true: each command it shows is a task with those flags, its config
reference lists every key the dev stack sets, and the bounds it states are the program's."""

from __future__ import annotations

import re
import shlex
from typing import Any

import yaml
from invoke import Task

import tasks
from launch.stack_config import PROJECT_DIR
from stacks import config

DOC = (PROJECT_DIR / "docs" / "aws.md").read_text()


def _commands() -> list[list[str]]:
    blocks = re.findall(r"```[a-z]*\n(.*?)```", DOC, flags=re.DOTALL)
    lines = [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]
    return [shlex.split(line) for line in lines if line]


def test_every_command_shown_is_a_task_with_those_flags() -> None:
    found = {name.replace("_", "-"): task for name, task in vars(tasks).items()
             if isinstance(task, Task)}
    commands = _commands()
    assert len(commands) >= 5
    for words in commands:
        assert words[0] == ".venv/bin/invoke", words
        task = found[words[1]]
        flags = {f"--{name.replace('_', '-')}" for name in task.help or {}}
        assert {word.split("=")[0] for word in words[2:] if word.startswith("-")} <= flags, words


def _reference_keys() -> set[str]:
    """The keys of the config reference table, `a.b.c` / `d` written out as `a.b.c`, `a.b.d`."""
    keys = set()
    for row in re.findall(r"^\| (`[^|]*`) \|", DOC, flags=re.MULTILINE):
        first, *siblings = re.findall(r"`([^`]+)`", row)
        keys.add(first)
        parent = first.rsplit(".", 1)[0]
        keys.update(f"{parent}.{sibling}" for sibling in siblings)
    return keys


def _general(path: str) -> str:
    path = re.sub(r"^spotburst:(doll|elastic|rl|inference)\.", "spotburst:<exp>.", path)
    path = re.sub(r"\.nodePools\.\w+\.", ".nodePools.<pool>.", path)
    return re.sub(r"\[\d+\]", "[i]", path)


def _leaves(prefix: str, value: Any) -> list[str]:
    if isinstance(value, dict) and not prefix.endswith(".resources"):
        return [leaf for key, item in value.items() for leaf in _leaves(f"{prefix}.{key}", item)]
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [leaf for index, item in enumerate(value) for leaf in
                _leaves(f"{prefix}[{index}]", item)]
    return [prefix]


def test_the_reference_lists_every_key_the_dev_stack_sets() -> None:
    shipped = yaml.safe_load((PROJECT_DIR / "Pulumi.dev.yaml").read_text())["config"]
    keys = {_general(leaf) for key, value in shipped.items() for leaf in _leaves(key, value)}
    keys |= {"spotburst:maxHourlyUsd"}  # commented out in the dev file
    assert keys - _reference_keys() == set()


def _row(key: str) -> str:
    [row] = [line for line in DOC.splitlines() if line.startswith(f"| `{key}`")]
    return row


def test_the_bounds_stated_are_the_programs() -> None:
    assert f"0–{config.MAX_POOL_NODES}" in _row("spotburst:spotCluster.nodePools.<pool>.minSize")
    assert f"0–{config.MAX_WORKER_PODS}" in _row("spotburst:<exp>.workerGroups[i].minReplicas")
    assert f"0–{config.MAX_BURST_NODES}" in _row("spotburst:burst.hpcWorkers")
    assert f"1–{config.MAX_BURST_NODES}" in _row("spotburst:burst.cloudNodes")
    assert f"1–{config.MAX_RESULTS_DAYS}" in _row("spotburst:bucket.expireResultsAfterDays")
    assert f"0–{config.MAX_RAY_RESOURCE:g}" in _row("spotburst:<exp>.workerGroups[i].resources")
