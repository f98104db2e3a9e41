"""The RL workload on a real spot lab (two learner nodes and two 1-CPU spot nodes, one env
runner), in one run: the learner's node is lost (killed without notice) once the first
checkpoint is written, and a new learner on the other learner node resumes from it with the
same env runner; later the spot node running the env runner is preempted (a notice, a drain,
a kill) and the runner is restarted on the spot node that is left; training goes on to the
end, and the checkpoints and rewards it wrote read back without unpickling anything."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.rl_scaling import drive
from launch.rl import LabFaults
from spotlab import SpotLabConfig, spot_lab
from spotlab.state import STATE_DIR_ENV
from workloads.common.results import read_json, read_records
from workloads.common.storage import LocalStorage
from workloads.rl.checkpoint import checkpoint_names, read_checkpoint
from workloads.rl.evaluation import phase
from workloads.rl.figures import draw

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
LAB = SpotLabConfig(spot=2, on_demand=0, learner=2, cpus_per_node=1, alpha=1.0, warning_s=1.0,
                    replace_delay_s=1.0, object_store_mb=80, dashboard=False)
"""α = 1: no preemption but the test's own; one spot node more than env runners, one learner
node more than learners."""
RUNNERS = 1
STEPS, PER_ITERATION, HIDDEN, CHECKPOINT_EVERY, EVAL_EVERY, SEED = 1600, 100, 32, 3, 2, 3
ARGS = ["--steps", str(STEPS), "--env-runners", str(RUNNERS), "--steps-per-iteration",
        str(PER_ITERATION), "--rollout-fragment", "25", "--learning-starts", "100",
        "--batch-size", "32", "--updates-per-step", "0.1", "--hidden", str(HIDDEN),
        "--eval-every", str(EVAL_EVERY),
        "--eval-episodes", "1", "--checkpoint-every", str(CHECKPOINT_EVERY), "--seed", str(SEED)]
LOSE_LEARNER_AT, PREEMPT_EVERY = CHECKPOINT_EVERY + 1, 2 * CHECKPOINT_EVERY
"""The learner's node lost after the first iteration past the first checkpoint; the runner's
node preempted after the iteration twice that (run again by the new learner), leaving
iterations to run after each: ten after the preemption, where about three end between its
notice and the runner's loss, so the runner is lost, and back, before the run ends."""
RUN_TIMEOUT_S = 600.0


class OnePreemption(LabFaults):
    """LabFaults with its first preemption only: the run is long enough for a second."""

    def feed(self, line: str) -> None:
        super().feed(line)
        if self.preempted:
            self.preempt_every = 0


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One run on its own lab with the faults above."""
    out = tmp_path_factory.mktemp("rl") / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_DIR_ENV, str(tmp_path_factory.mktemp("spotlab-state")))
        with spot_lab(LAB) as lab:
            faults = OnePreemption(PREEMPT_EVERY, LOSE_LEARNER_AT, lab=lab)
            driven = drive(lab, ARGS, out, faults, timeout_s=RUN_TIMEOUT_S)
            injected = driven["faults"]["injected"]
            yield {**driven, "out": out, "events": lab.events(),
                   "interrupted": [f["node"] for f in injected if f["kind"] == "preempt"],
                   "preempted_ray": [f["ray_node_id"] for f in injected
                                     if f["kind"] == "preempt"],
                   "lost_learners": [f["node"] for f in injected
                                     if f["kind"] == "lose-learner"]}


def test_training_goes_on_through_a_spot_preemption(run: dict[str, Any]) -> None:
    assert run["returncode"] == 0, "\n".join(run["lines"][-40:])
    [interrupted] = run["interrupted"]
    kinds = [e["event"] for e in run["events"] if e["node"] == interrupted]
    assert "notice" in kinds and "kill" in kinds
    storage = LocalStorage(run["out"])
    summary = read_json(storage, "summary.json")
    assert summary["env_steps"] >= STEPS
    assert summary["preemptions"] >= 1
    assert summary["env_runners_replaced"] == 1
    assert summary["learner_resumes"] == 1
    rows = read_records(storage, "iterations")
    assert rows[-1]["env_steps"] == summary["env_steps"]
    # after the restart the runner samples again, on the node it was not on
    assert rows[-1]["healthy_runners"] == RUNNERS
    assert rows[-1]["runner_nodes"] != run["preempted_ray"]
    preemptions = read_records(storage, "preemptions")
    assert preemptions, "the run ended before the preempted node was killed"
    assert preemptions[0]["node_id"] == run["preempted_ray"][0]
    # the learner saw the runner lost, back (restarted by Ray) and sampling again, in order
    events = read_records(storage, "runner_events")
    assert [e["event"] for e in events] == ["lost", "back", "sampling"]
    lost, back, sampling = events
    assert lost["node"] == run["preempted_ray"][0] != back["node"] == sampling["node"]
    assert lost["epoch"] <= back["epoch"] <= sampling["dispatched"] <= sampling["epoch"]
    # training went on with the restarted runner: an iteration ended after it sampled again
    # (with one runner, the iteration the node was lost in waited for it)
    assert any(row["t"] >= sampling["t"] for row in rows)
    assert 0 < summary["cost"] < summary["all_on_demand_cost"]


def test_a_lost_learner_resumes_from_its_last_checkpoint_with_the_same_runners(
        run: dict[str, Any]) -> None:
    lost = run["lost_learners"]
    assert len(lost) == 1, "\n".join(run["lines"][-60:])
    assert "kill" in [e["event"] for e in run["events"] if e["node"] == lost[0]]
    learners = [line.split("on node ")[1].split(";")[0] for line in run["lines"]
                if line.startswith("learner (Trainer) on node")]
    assert len(learners) == 2 and learners[0] != learners[1]
    storage = LocalStorage(run["out"])
    summary = read_json(storage, "summary.json")
    rows = read_records(storage, "iterations")
    resumed = [i for i, row in enumerate(rows) if row["learner_resumes"] == 1]
    before, after = rows[resumed[0] - 1], rows[resumed[0]]
    # the new learner samples with the runner it found: on the same node, not restarted
    assert after["runner_nodes"] == before["runner_nodes"]
    assert after["runner_restarts"] == before["runner_restarts"]
    # it goes on from the newest checkpoint's iteration and env steps (those sampled since
    # are lost), not from zero
    [resumed_from] = [line.split("resuming from ")[1].split(" ")[0] for line in run["lines"]
                      if line.startswith("learner lost")]
    checkpoint = int(resumed_from.rsplit("_", 1)[1])
    assert CHECKPOINT_EVERY <= checkpoint <= before["iteration"]
    at_checkpoint = rows[checkpoint - 1]["env_steps"]
    assert after["iteration"] == checkpoint + 1
    assert at_checkpoint < after["env_steps"] <= at_checkpoint + 2 * PER_ITERATION
    assert summary["samples_lost"] == before["env_steps"] - rows[checkpoint - 1]["env_steps"]
    iterations, k = [row["iteration"] for row in rows], resumed[0]
    assert iterations[:k] == list(range(1, k + 1))
    assert iterations[k:] == list(range(checkpoint + 1, checkpoint + 1 + len(rows) - k))
    assert rows[-1]["env_steps"] >= STEPS


def test_evaluations_and_checkpoints_are_in_the_run_storage(run: dict[str, Any]) -> None:
    storage = LocalStorage(run["out"])
    rows = read_records(storage, "iterations")
    evaluated = [row for row in rows if row["eval_episodes"] > 0]
    rewards = [json.loads(line) for line in
               (run["out"] / "rewards.jsonl").read_text().splitlines()]
    periodic_rewards = [r for r in rewards if not r["final"]]
    final = [r for r in rewards if r["final"]]  # every runner, on the final policy
    assert len(final) == RUNNERS and rewards[-RUNNERS:] == final
    summary = read_json(storage, "summary.json")
    assert summary["last_eval_return"] == pytest.approx(sum(r["return"] for r in final) /
                                                        RUNNERS)
    assert [r["iteration"] for r in periodic_rewards] == [
        row["iteration"] for row in evaluated for _ in row["evaluations"]]
    assert [r["return"] for r in periodic_rewards] == [e["return"] for row in evaluated
                                                       for e in row["evaluations"]]
    # each runner evaluates after every EVAL_EVERY-th of its episodes, at its own phase
    assert periodic_rewards and all(
        (r["runner_episode"] + phase(SEED, r["runner"], EVAL_EVERY)) % EVAL_EVERY == 0
        for r in periodic_rewards)
    assert all(len(r["returns"]) == 1 for r in rewards)
    names = checkpoint_names(storage)
    periodic = sorted(int(n.rsplit("_", 1)[1]) for n in names if "/iter_" in n)
    assert periodic == list(range(CHECKPOINT_EVERY, rows[-1]["iteration"] + 1,
                                  CHECKPOINT_EVERY))
    best: float | None = None
    saved: list[tuple[int, bool, float]] = []  # (iteration, final, best), one per call
    for reward in rewards:  # the best of an iteration that beat the best so far is saved
        if best is None or reward["return"] > best:
            best = reward["return"]
            if saved and saved[-1][:2] == (reward["iteration"], reward["final"]):
                saved.pop()
            saved.append((reward["iteration"], reward["final"], best))
    assert {n for n in names if "/best_" in n} == {
        f"checkpoints/best_{ret:.1f}_{iteration}" for iteration, _, ret in saved}
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
    assert [p.name for p in drawn] == ["reward_vs_steps.png", "reward_vs_time.png",
                                       "reward_vs_cost.png"]
    assert all(p.stat().st_size > 10_000 for p in drawn)
