"""docs/rl.md's "Your own environment" as shown: a Gymnasium env class from the user's file
learns on the spot lab through env-runner preemptions (its own file, so CI runs it beside
test_rl.py's Pendulum run instead of after it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.acceptance import PROJECT_DIR, run_documented

OWN_COMMAND = "invoke run-rl --env examples/rl/reach.py:Reach --steps 2000 --eval-every 4"
RANDOM_REACH_RETURN = -15.0  # examples/rl/reach.py's random policy; going straight: about -2

pytestmark = [pytest.mark.ray, pytest.mark.subprocess, pytest.mark.slow]


def test_your_own_environment_learns_through_preemptions(tmp_path: Path) -> None:
    """docs/rl.md's "Your own environment": the example's class, shipped from its file to
    every env runner and the learner, learns while runners' spot nodes are preempted, and
    rl-evaluate runs its best checkpoint here."""
    out = tmp_path / "reach"
    summary = run_documented(OWN_COMMAND, out, timeout_s=1200)
    assert summary["env"] == "examples/rl/reach.py:Reach"
    assert summary["preemptions"] >= 1 and summary["env_runners_replaced"] >= 1
    assert summary["last_eval_return"] > RANDOM_REACH_RETURN / 2  # well past random
    for figure in ("reward_vs_steps.png", "reward_vs_time.png"):
        assert (out / figure).stat().st_size > 10_000, figure
    evaluated = tmp_path / "evaluated"
    done = subprocess.run(
        [sys.executable, "-m", "invoke", "rl-evaluate", "--run", str(out), "--episodes", "3",
         "--env", "examples/rl/reach.py:Reach", "--out", str(evaluated)],
        cwd=PROJECT_DIR, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    again = json.loads((evaluated / "summary.json").read_text())
    assert again["mean_return"] > RANDOM_REACH_RETURN / 2
