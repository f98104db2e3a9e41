"""`--env FILE.py:CLASS`: your own gymnasium.Env subclass, checked before anything starts
(one line naming --env), made on every node from its shipped file through FileEnv (never
pickled from the driver), and the network of the run built for its spaces."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.acceptance import PROJECT_DIR
from workloads.common.options import OptionError
from workloads.rl.envs import check_env, check_env_file, env_descriptor, env_file, make_env
from workloads.rl.options import RL_SPEC, RlOptions

REACH = "examples/rl/reach.py:Reach"

DISCRETE = '''
import gymnasium
import numpy as np
from gymnasium import spaces


class Choose(gymnasium.Env):
    def __init__(self):
        self.observation_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
'''


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(PROJECT_DIR)  # the docs' paths are the project's


def test_the_file_form_is_told_from_a_gymnasium_id() -> None:
    assert env_file(REACH) == (Path("examples/rl/reach.py"), "Reach")
    assert env_file("Pendulum-v1") == (None, "Pendulum-v1")
    assert env_file("my_package.envs:Reach-v0") == (None, "my_package.envs:Reach-v0")


def test_the_example_is_an_env_with_continuous_actions(here: None) -> None:
    check_env(REACH)
    check_env_file(REACH)
    env = make_env(*env_descriptor(REACH))
    try:
        observation, _ = env.reset(seed=3)
        assert observation.shape == (2,)
        total = 0.0
        for _ in range(30):
            observation, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total += float(reward)
        assert truncated and not terminated and total < 0
    finally:
        env.close()


@pytest.mark.parametrize(("body", "env", "message"), [
    ("x = 1\n", "{path}:Reach", "--env: {path} defines no 'Reach' (expected FILE.py:CLASS, a "
     "gymnasium.Env subclass in FILE.py)"),
    ("class Reach:\n    pass\n", "{path}:Reach", "--env: Reach in {path} is not a "
     "gymnasium.Env subclass (a type)"),
    (DISCRETE, "{path}:Choose", "--env: '{path}:Choose' has Discrete actions; SAC here needs "
     "continuous (Box) actions, e.g. Pendulum-v1"),
    ("import surely_not_installed_env_pkg\n", "{path}:Reach", "--env: {resolved} imports "
     "'surely_not_installed_env_pkg', which is not installed here"),
])
def test_a_bad_env_file_is_one_line_naming_env(
    tmp_path: Path, body: str, env: str, message: str,
) -> None:
    path = tmp_path / "my_env.py"
    path.write_text(body)
    with pytest.raises(OptionError) as error:
        check_env(env.format(path=path))
    assert str(error.value).startswith(message.format(path=path, resolved=path.resolve()))
    assert "\n" not in str(error.value)


def test_a_missing_file_or_class_is_named_before_reading_it_remotely(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="--env: nowhere.py: no such file"):
        check_env("nowhere.py:Reach")
    path = tmp_path / "env.py"
    path.write_text("import not_here_but_on_the_cluster\n\nclass Other:\n    pass\n")
    check_env_file(f"{path}:Other")  # read, not run: the cluster installs its requirements
    with pytest.raises(OptionError, match="--env: .* defines no 'Reach'"):
        check_env_file(f"{path}:Reach")


def test_the_runs_network_is_built_for_the_files_env(here: None) -> None:
    from workloads.rl.algorithm import policy_module, sac_config
    from workloads.rl.user_env import FileEnv

    options = RlOptions(env=REACH, hidden=8)
    config = sac_config(options)
    assert config.env is FileEnv  # an importable wrapper: the user's class is not pickled
    assert config.env_config["class"] == "Reach"
    module = policy_module(options)
    assert sum(p.numel() for p in module.parameters()) > 0
    shipped = RL_SPEC.parse(["--env", REACH, "--env-file", "examples/rl/reach.py"])
    assert shipped.env_file == Path("examples/rl/reach.py")
    assert RL_SPEC.paths_of(shipped) == {"--env-file": Path("examples/rl/reach.py")}


def test_gymnasiums_module_form_imports_the_module_that_registers_the_id() -> None:
    check_env("gymnasium.envs.classic_control:Pendulum-v1")
    with pytest.raises(OptionError, match="--env: 'no_such_env_module:Reach-v0': its module "
                                          "'no_such_env_module' cannot be imported here"):
        check_env("no_such_env_module:Reach-v0")
