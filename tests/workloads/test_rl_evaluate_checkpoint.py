"""`invoke rl-evaluate`: a saved checkpoint's weights, loaded into the run's network built from
the options it recorded, act in new episodes; bad runs and checkpoints are one line each."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest

from workloads.common.storage import LocalStorage
from workloads.rl.algorithm import policy_module
from workloads.rl.checkpoint import pack_state, write_checkpoint
from workloads.rl.evaluate_checkpoint import choose, main
from workloads.rl.options import RlOptions

OPTIONS = RlOptions(hidden=8, env_runners=1, seed=4)


def _learner_state(weights: dict[str, np.ndarray]) -> dict[str, Any]:
    return {"learner": {"rl_module": {"default_policy": weights}}}


def _save(run: Path, name: str, weights: dict[str, np.ndarray],
          options: RlOptions = OPTIONS) -> None:
    write_checkpoint(LocalStorage(run), f"checkpoints/{name}", pack_state(_learner_state(weights)),
                     {"iteration": 3, "env_steps": 300, "eval_return": -1.0,
                      "options": options.parameters()})


def _zero_weights(options: RlOptions = OPTIONS) -> dict[str, np.ndarray]:
    return {key: np.zeros(tuple(value.shape), np.float32)
            for key, value in policy_module(options).state_dict().items()}


def _zero_torque_returns(seeds: list[int]) -> list[float]:
    """Pendulum with no torque at all, stepped here without any network."""
    env = gymnasium.make("Pendulum-v1")
    returns = []
    for seed in seeds:
        env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(np.zeros(1, np.float32))
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    env.close()
    return returns


@pytest.mark.subprocess  # git, for the provenance
def test_the_checkpoint_weights_are_the_ones_that_act(tmp_path: Path) -> None:
    """All-zero weights give μ = 0, so tanh(μ) = 0, the middle of Pendulum's torque range: the
    returns must be those of no torque (a freshly initialised network would push)."""
    run = tmp_path / "run"
    _save(run, "best_-1.0_3", _zero_weights())
    out = tmp_path / "evaluated"
    assert main(["--run", str(run), "--episodes", "2", "--seed", "7", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["checkpoint"] == "checkpoints/best_-1.0_3"
    assert summary["returns"] == pytest.approx(_zero_torque_returns([7, 8]), abs=1e-6)
    assert summary["mean_return"] == pytest.approx(np.mean(summary["returns"]))
    episodes = [json.loads(line) for line in
                (out / "records" / "episodes.jsonl").read_text().splitlines()]
    assert [e["seed"] for e in episodes] == [7, 8]
    provenance = json.loads((out / "provenance.json").read_text())
    assert set(provenance["inputs"]) == {"checkpoint_state", "checkpoint_meta"}
    assert provenance["run_options"]["hidden"] == 8


def test_best_and_last_are_chosen_by_number_not_by_name() -> None:
    names = [f"checkpoints/{n}" for n in
             ("best_99.0_4", "best_100.0_9", "best_-5.0_2", "iter_9", "iter_10")]
    assert choose(names, "best") == "checkpoints/best_100.0_9"
    assert choose(names, "last") == "checkpoints/iter_10"
    assert choose(names, "iter_9") == choose(names, "checkpoints/iter_9") == "checkpoints/iter_9"


def test_bad_runs_and_checkpoints_are_one_line_each_and_write_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    _save(run, "iter_3", _zero_weights())
    wider = RlOptions(hidden=16, env_runners=1)
    _save(run, "iter_6", _zero_weights(wider))  # weights of another network than recorded
    crafted = run / "checkpoints" / "iter_9"
    _save(run, "iter_9", _zero_weights())
    (crafted / "state.msgpack").write_bytes(pickle.dumps({"learner": {}}))
    out = tmp_path / "never"
    for argv, line in (
        (["--run", str(tmp_path / "missing")], "error: --run: no folder"),
        (["--run", str(tmp_path)], "error: --run: "),
        (["--run", str(run)], "error: --checkpoint: the run has no best_<...> checkpoint"),
        (["--run", str(run), "--checkpoint", "iter_4"], "error: --checkpoint: no checkpoint "
         "'iter_4' in the run (it has: iter_3, iter_6, iter_9)"),
        (["--run", str(run), "--checkpoint", "iter_9"], "error: --checkpoint: "
         "checkpoints/iter_9"),
        (["--run", str(run), "--checkpoint", "iter_6"], "error: --checkpoint: checkpoints/iter_6:"
         " its state does not fit the run's network"),
    ):
        assert main([*argv, "--out", str(out)]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith(line) and err.count("\n") == 1, (argv, err)
    assert not out.exists()
