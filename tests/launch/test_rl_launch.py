"""`invoke run-rl`'s launcher: a bad environment is refused before any lab starts, and the
local lab gets a learner node when the learner is to be placed on one."""

from __future__ import annotations

from typing import Any

import pytest

from launch.rl import rl_lab, run_rl
from spotlab.options import SpotLabOptions
from workloads.common.options import OptionError
from workloads.rl.options import RlOptions


def test_a_discrete_env_is_refused_before_a_lab_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_run(*args: Any, **kwargs: Any) -> None:
        pytest.fail("a target was started for a bad --env")

    monkeypatch.setattr("launch.rl.run_workload", no_run)
    with pytest.raises(OptionError, match="^--env: 'CartPole-v1' has Discrete actions"):
        run_rl(RlOptions(env="CartPole-v1"))


def test_the_lab_has_a_learner_node_for_the_learner() -> None:
    assert SpotLabOptions().learner == 0
    assert rl_lab(RlOptions(), SpotLabOptions()).learner == 1
    assert rl_lab(RlOptions(), SpotLabOptions(learner=2)).learner == 2
    assert rl_lab(RlOptions(learner_on="on-demand"), SpotLabOptions()).learner == 0
    assert rl_lab(RlOptions(), SpotLabOptions(spot=2, lab_seed=4)).spot == 2
