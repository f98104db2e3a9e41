"""The RL workload's flags: bad input ends in one line naming the flag, before Ray starts."""

from __future__ import annotations

import pytest

from spotlab.options import LAB_SPEC
from workloads.common.options import OptionError
from workloads.rl.__main__ import main
from workloads.rl.algorithm import placement, sac_config
from workloads.rl.envs import check_env
from workloads.rl.options import RL_SPEC, RlOptions


@pytest.mark.parametrize("argv, flag, words", [
    (["--env", "NoSuchEnv-v9"], "--env", "is not a Gymnasium environment"),
    (["--env", "CartPole-v1"], "--env", "has Discrete actions"),
    (["--env-runners", "0"], "--env-runners", "expected an integer in [1, 64]"),
    (["--learner-on", "gpu"], "--learner-on", "one of learner, on-demand, anywhere"),
    (["--rollout-fragment", "500", "--steps-per-iteration", "100"], "--rollout-fragment",
     "at most --steps-per-iteration"),
    (["--spot", "3"], "--spot", "is not an option"),
])
def test_bad_input_is_one_line_naming_the_flag(
    argv: list[str], flag: str, words: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("workloads.rl.__main__.ray_session", lambda: pytest.fail("Ray started"))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"error: {flag}: ") and words in err


def test_a_continuous_env_passes_the_check() -> None:
    check_env("Pendulum-v1")
    check_env("MountainCarContinuous-v0")
    with pytest.raises(OptionError) as caught:
        check_env("Acrobot-v1")
    assert caught.value.flag == "--env"


def test_flags_do_not_collide_with_the_lab_or_the_target() -> None:
    lab = {o.dest for o in LAB_SPEC.options}
    mine = {o.dest for o in RL_SPEC.user_options}
    assert not mine & (lab | {"address", "stack", "out"})
    assert RL_SPEC.parse(RL_SPEC.argv(RlOptions(steps=300, seed=3))) == RlOptions(steps=300,
                                                                                   seed=3)


def test_runners_go_to_spot_nodes_and_the_learner_to_its_pool() -> None:
    options = RlOptions(env_runners=3, hidden=32, learning_rate=1e-3, eval_every=5)
    config = sac_config(options)
    assert config.num_env_runners == 3
    assert config.custom_resources_per_env_runner == {"spot": 1.0}
    assert config.num_cpus_per_env_runner == 1
    assert config.restart_failed_env_runners is True
    assert config.env_runner_health_probe_timeout_s == options.probe_timeout_s
    assert not config.evaluation_interval  # the runners evaluate (workloads/rl/evaluation.py)
    assert config.callbacks_class.__name__ == "PeriodicEvaluation"
    assert config.model_config["fcnet_hiddens"] == [32, 32]  # the RLModule's networks
    assert config.actor_lr == config.critic_lr == config.alpha_lr == 1e-3
    assert placement("learner") == {"learner": 1.0}
    assert placement("on-demand") == {"on_demand": 1.0}
    assert placement("anywhere") == {}
