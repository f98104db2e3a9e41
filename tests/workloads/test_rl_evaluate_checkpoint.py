"""`invoke rl-evaluate`: a saved checkpoint's weights, loaded into the run's network built from
the options it recorded, act in new episodes; bad runs and checkpoints are one line each."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
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

REPO = Path(__file__).resolve().parents[2]
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


def _constant_torque_returns(torque: float, seeds: list[int]) -> list[float]:
    """Pendulum under one constant torque, stepped here without any network."""
    env = gymnasium.make("Pendulum-v1")
    returns = []
    for seed in seeds:
        env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(np.full(1, torque, np.float32))
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    env.close()
    return returns


@pytest.mark.subprocess  # git, for the provenance
def test_the_checkpoint_weights_are_the_ones_that_act(tmp_path: Path) -> None:
    """Zero weights but the policy head's mean bias atanh(0.5): tanh(μ) = 0.5 for every
    observation, which maps to 1.0 in Pendulum's [-2, 2] torque range. The returns must be
    those of a constant torque of 1.0 (a freshly initialised network would not act so, nor
    one that skipped tanh or the mapping to the env's bounds)."""
    weights = _zero_weights()
    weights["pi.net.mlp.0.bias"][0] = np.arctanh(0.5)  # the mean's half of [mean, log std]
    run = tmp_path / "run"
    _save(run, "best_-1.0_3", weights)
    out = tmp_path / "evaluated"
    assert main(["--run", str(run), "--episodes", "2", "--seed", "7", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["checkpoint"] == "checkpoints/best_-1.0_3"
    assert summary["returns"] == pytest.approx(_constant_torque_returns(1.0, [7, 8]), abs=1e-4)
    assert summary["returns"] != pytest.approx(_constant_torque_returns(0.0, [7, 8]), abs=1.0)
    assert summary["mean_return"] == pytest.approx(np.mean(summary["returns"]))
    episodes = [json.loads(line) for line in
                (out / "records" / "episodes.jsonl").read_text().splitlines()]
    assert [e["seed"] for e in episodes] == [7, 8]
    provenance = json.loads((out / "provenance.json").read_text())
    assert set(provenance["inputs"]) == {"checkpoint_state", "checkpoint_meta"}
    assert provenance["run_options"]["hidden"] == 8


def test_best_and_last_are_chosen_by_number_not_by_name() -> None:
    names = [f"checkpoints/{n}" for n in
             ("best_99.0_4", "best_100.0_9", "best_-5.0_2", "best_x", "iter_9", "iter_10")]
    assert choose(names, "best") == "checkpoints/best_100.0_9"
    assert choose(names, "last") == "checkpoints/iter_10"
    assert choose(names, "iter_9") == choose(names, "checkpoints/iter_9") == "checkpoints/iter_9"


def test_bad_runs_and_checkpoints_are_one_line_each_and_write_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    _save(run, "iter_3", _zero_weights())
    wider = RlOptions(hidden=16, env_runners=1)
    _save(run, "iter_6", _zero_weights(wider))  # weights of another network than recorded
    _save(run, "iter_9", _zero_weights())
    (run / "checkpoints" / "iter_9" / "state.msgpack").write_bytes(pickle.dumps({"learner": {}}))
    _save(run, "iter_12", _zero_weights())
    (run / "checkpoints" / "iter_12" / "meta.json").write_text("{not json")
    _save(run, "iter_15", _zero_weights())
    (run / "checkpoints" / "iter_15" / "state.msgpack").unlink()
    out = tmp_path / "never"
    for argv, line in (
        (["--run", str(tmp_path / "missing")], "error: --run: no folder"),
        (["--run", str(tmp_path)], "error: --run: "),
        (["--run", str(run)],
         "error: --checkpoint: the run has no best_<return>_<iteration> checkpoint"),
        (["--run", str(run), "--checkpoint", "iter_4"], "error: --checkpoint: no checkpoint "
         "'iter_4' in the run (it has: iter_12, iter_15, iter_3, iter_6, iter_9)"),
        (["--run", str(run), "--checkpoint", "iter_12"], "error: --checkpoint: "
         "checkpoints/iter_12: meta.json is not JSON"),
        (["--run", str(run), "--checkpoint", "iter_15"], "error: --checkpoint: "
         "checkpoints/iter_15: no state.msgpack"),
        (["--run", str(run), "--checkpoint", "iter_9"], "error: --checkpoint: "
         "checkpoints/iter_9"),
        (["--run", str(run), "--checkpoint", "iter_6"], "error: --checkpoint: checkpoints/iter_6:"
         " its state does not fit the run's network"),
    ):
        assert main([*argv, "--out", str(out)]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith(line) and err.count("\n") == 1, (argv, err)
    assert not out.exists()


@pytest.mark.subprocess
def test_a_fresh_process_refuses_weights_of_another_network_in_one_line(tmp_path: Path) -> None:
    """As a user runs it: RLlib's import and module build print nothing else on stderr."""
    run = tmp_path / "run"
    _save(run, "iter_3", _zero_weights(RlOptions(hidden=16, env_runners=1)))
    done = subprocess.run(
        [sys.executable, "-m", "workloads.rl.evaluate_checkpoint", "--run", str(run),
         "--checkpoint", "last", "--out", str(tmp_path / "never")],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.startswith("error: --checkpoint: checkpoints/iter_3: its state does not "
                                  "fit the run's network") and done.stderr.count("\n") == 1, \
        done.stderr
    assert not (tmp_path / "never").exists()


MARKS_IMPORT = "from pathlib import Path\nPath({mark!r}).write_text('imported')\n"


@pytest.mark.parametrize("form", ["file", "module"])
def test_a_checkpoint_never_names_code_to_import_unless_the_user_names_it_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        form: str) -> None:
    """A checkpoint from someone else whose meta.json names an env that is code (a file
    beside it, or a module importable here): refused in one line naming --env, before any
    import, unless --env names that same env; another --env is refused too."""
    mark = tmp_path / "imported"
    code = tmp_path / "planted.py"
    code.write_text(MARKS_IMPORT.format(mark=str(mark)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # the module form: importable here
    env = "planted.py:Env" if form == "file" else "planted:Planted-v0"
    run = tmp_path / "run"
    recorded = OPTIONS.parameters() | {"env": env}
    write_checkpoint(LocalStorage(run), "checkpoints/iter_3",
                     pack_state(_learner_state(_zero_weights())),
                     {"iteration": 3, "env_steps": 300, "eval_return": -1.0,
                      "options": recorded})
    out = tmp_path / "never"
    for extra, line in (
        ([], f"error: --env: checkpoints/iter_3: its run's environment {env!r} is code to "
             f"import, never imported on a checkpoint's word: give --env {env} to run it\n"),
        (["--env", "Pendulum-v1"], f"error: --env: checkpoints/iter_3: its run recorded the "
                                   f"environment {env!r}, not 'Pendulum-v1'\n"),
    ):
        argv = ["--run", str(run), "--checkpoint", "last", "--out", str(out), *extra]
        assert main(argv) == 2
        assert capsys.readouterr().err == line
        assert not mark.exists() and not out.exists()
    # named by the user, the same env is imported (and, not an env at all, refused after)
    assert main(["--run", str(run), "--checkpoint", "last", "--out", str(out), "--env",
                 env]) == 2
    assert mark.exists() and not out.exists()


@pytest.mark.subprocess  # git, for the provenance
def test_a_checkpoint_of_a_file_env_runs_when_the_user_names_that_env(tmp_path: Path) -> None:
    env = "examples/rl/reach.py:Reach"
    options = RlOptions(hidden=8, env_runners=1, env=env)
    run = tmp_path / "run"
    _save(run, "iter_3", _zero_weights(options), options)
    done = subprocess.run(
        [sys.executable, "-m", "workloads.rl.evaluate_checkpoint", "--run", str(run),
         "--checkpoint", "last", "--episodes", "1", "--env", env, "--out",
         str(tmp_path / "evaluated")],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tmp_path / "evaluated" / "summary.json").read_text())["env"] == env
