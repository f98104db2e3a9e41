"""The RL workload on a real spot lab (a learner node and two 1-CPU spot nodes, one env
runner): the spot node running the env runner is preempted mid-run (a notice, a drain, a
kill), the runner is restarted on the spot node that is left, training goes on to the end, and
the checkpoints and rewards it wrote read back without unpickling anything."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.rl_pendulum import drive
from spotlab import SpotLabConfig, spot_lab
from spotlab.state import STATE_DIR_ENV
from workloads.common.results import read_json, read_records
from workloads.common.storage import LocalStorage
from workloads.rl.checkpoint import checkpoint_names, read_checkpoint
from workloads.rl.figures import draw

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
LAB = SpotLabConfig(spot=2, on_demand=0, learner=1, cpus_per_node=1, alpha=1.0, warning_s=2.0,
                    replace_delay_s=1.0, object_store_mb=80, dashboard=False)
"""α = 1: no preemption but the test's own; one spot node more than env runners."""
RUNNERS = 1
STEPS, PER_ITERATION, HIDDEN, CHECKPOINT_EVERY, EVAL_EVERY = 1200, 100, 32, 3, 2
ARGS = ["--steps", str(STEPS), "--env-runners", str(RUNNERS), "--steps-per-iteration",
        str(PER_ITERATION), "--rollout-fragment", "25", "--learning-starts", "100",
        "--batch-size", "32", "--hidden", str(HIDDEN), "--eval-every", str(EVAL_EVERY),
        "--eval-episodes", "1", "--checkpoint-every", str(CHECKPOINT_EVERY), "--seed", "3"]
INTERRUPT_AFTER = 2
RUN_TIMEOUT_S = 600.0


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One run on its own lab; the spot node of the first env runner interrupted after the
    second iteration."""
    out = tmp_path_factory.mktemp("rl") / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_DIR_ENV, str(tmp_path_factory.mktemp("spotlab-state")))
        with spot_lab(LAB) as lab:
            driven = drive(lab, ARGS, out, lambda n: n == INTERRUPT_AFTER,
                           timeout_s=RUN_TIMEOUT_S)
            yield {**driven, "out": out, "events": lab.events(),
                   "interrupted": driven["interrupted"][0] if driven["interrupted"] else None}


def test_training_goes_on_through_a_spot_preemption(run: dict[str, Any]) -> None:
    assert run["returncode"] == 0, "\n".join(run["lines"][-40:])
    assert run["interrupted"] is not None
    kinds = [e["event"] for e in run["events"] if e["node"] == run["interrupted"]]
    assert "notice" in kinds and "kill" in kinds
    storage = LocalStorage(run["out"])
    summary = read_json(storage, "summary.json")
    assert summary["env_steps"] >= STEPS
    assert summary["preemptions"] >= 1
    assert summary["env_runner_restarts"] >= 1
    assert summary["learner_resumes"] == 0
    rows = read_records(storage, "iterations")
    assert [row["iteration"] for row in rows] == list(range(1, len(rows) + 1))
    assert rows[-1]["env_steps"] == summary["env_steps"]
    # after the restart the runner samples again, on the node it was not on
    assert rows[-1]["healthy_runners"] == RUNNERS
    assert set(rows[-1]["runner_nodes"]) != set(run["first_runners"])
    preemption = read_records(storage, "preemptions")[0]
    assert preemption["node_id"] == run["first_runners"][0]
    assert any(row["iteration"] > preemption["iteration"] for row in rows)


def test_evaluations_and_checkpoints_are_in_the_run_storage(run: dict[str, Any]) -> None:
    storage = LocalStorage(run["out"])
    rows = read_records(storage, "iterations")
    evaluated = [row for row in rows if row["eval_episodes"] > 0]
    rewards = [json.loads(line) for line in
               (run["out"] / "rewards.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rewards] == [row["iteration"] for row in evaluated]
    assert [r["return"] for r in rewards] == [row["eval_return"] for row in evaluated]
    assert all(r["iteration"] % EVAL_EVERY == 0 for r in rewards)
    names = checkpoint_names(storage)
    periodic = sorted(int(n.rsplit("_", 1)[1]) for n in names if "/iter_" in n)
    assert periodic == list(range(CHECKPOINT_EVERY, len(rows) + 1, CHECKPOINT_EVERY))
    best = [n for n in names if "/best_" in n]
    improving = []
    for reward in rewards:
        if not improving or reward["return"] > improving[-1]["return"]:
            improving.append(reward)
    assert sorted(best) == sorted(f"checkpoints/best_{r['return']:.1f}_{r['iteration']}"
                                  for r in improving)
    summary = read_json(storage, "summary.json")
    assert summary["best_eval_return"] == max(r["return"] for r in rewards)
    assert sorted(summary["checkpoints"]) == names
    assert not [p for p in run["out"].rglob("*") if p.suffix in (".pkl", ".pickle")]


def test_a_checkpoint_holds_the_learner_weights(run: dict[str, Any]) -> None:
    storage = LocalStorage(run["out"])
    last = max((n for n in checkpoint_names(storage) if "/iter_" in n),
               key=lambda n: int(n.rsplit("_", 1)[1]))
    checkpoint = read_checkpoint(storage, last)
    assert checkpoint.meta["iteration"] == int(last.rsplit("_", 1)[1])
    weights = {name: value for name, value in _arrays(checkpoint.state)}
    assert weights and all(np.all(np.isfinite(v)) for v in weights.values())
    # Pendulum: 3 observations in, [HIDDEN, HIDDEN] hidden layers
    assert any(v.shape == (HIDDEN, 3) for v in weights.values())
    assert any(v.shape == (HIDDEN, HIDDEN) for v in weights.values())


def _arrays(tree: Any, prefix: str = "") -> Iterator[tuple[str, np.ndarray]]:
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _arrays(value, f"{prefix}/{key}")
    elif isinstance(tree, np.ndarray) and tree.ndim == 2:
        yield prefix, tree


def test_the_reward_figures_are_drawn_from_the_records(run: dict[str, Any]) -> None:
    drawn = draw(run["out"])
    assert [p.name for p in drawn] == ["reward_vs_steps.png", "reward_vs_time.png"]
    assert all(p.stat().st_size > 10_000 for p in drawn)
