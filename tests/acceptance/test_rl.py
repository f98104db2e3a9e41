"""`invoke run-rl` as docs/rl.md shows it: SAC learns Pendulum-v1 while the spot nodes of its
env runners are preempted, and the figures are drawn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.acceptance.test_rl_own_env import OWN_COMMAND
from tests.helpers.acceptance import PROJECT_DIR, run_documented

COMMAND = "invoke run-rl"
TARGET_RETURN = -300.0

pytestmark = [pytest.mark.ray, pytest.mark.subprocess, pytest.mark.slow]


def test_the_documented_command_is_the_one_run_here() -> None:
    fenced = (PROJECT_DIR / "docs" / "rl.md").read_text().split("```")[1::2]
    lines = [line.split("#")[0].strip() for block in fenced for line in block.splitlines()]
    assert [line for line in lines if line.startswith("invoke run-rl")] == [COMMAND,
                                                                          OWN_COMMAND]


def test_run_rl_learns_through_env_runner_preemptions(tmp_path: Path) -> None:
    out = tmp_path / "rl"
    summary = run_documented(COMMAND, out, timeout_s=1800)
    assert summary["preemptions"] >= 2  # spot nodes of env runners, preempted mid-run
    assert summary["env_runners_replaced"] >= 2  # each runner came back on another node
    parameters = json.loads((out / "provenance.json").read_text())["parameters"]
    assert summary["env_steps"] >= parameters["steps"]
    assert parameters["out"] == str(out.resolve())  # the folder the results are in
    assert summary["last_eval_return"] > TARGET_RETURN  # the final evaluation
    faults = json.loads((out / "spotlab" / "faults.json").read_text())
    assert len([f for f in faults["injected"] if f["kind"] == "preempt"]) >= 2
    for figure in ("reward_vs_steps.png", "reward_vs_time.png", "reward_vs_cost.png"):
        assert (out / figure).stat().st_size > 10_000, figure
