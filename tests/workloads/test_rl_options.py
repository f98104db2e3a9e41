"""The RL workload's flags: bad input ends in one line naming the flag, before Ray starts."""

from __future__ import annotations

import pytest

from launch.options import RL_LAB_SPEC, TARGET_SPEC
from spotlab.options import LAB_SPEC
from workloads.common.options import OptionError
from workloads.rl.__main__ import main
from workloads.rl.algorithm import placement, sac_config, trainer_options
from workloads.rl.envs import check_env
from workloads.rl.options import RL_SPEC, RlOptions
from workloads.rl.runners import runner_actor_options


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
    # one $/h of an on-demand node: run-rl's --on-demand-price prices its cost and its lab's
    # bill, and the lab's own flag of that name is not run-rl's
    assert mine & (lab | {"address", "stack", "out"}) == {"on_demand_price"}
    assert "on_demand_price" not in {o.dest for o in RL_LAB_SPEC.user_options}
    assert RL_SPEC.parse(RL_SPEC.argv(RlOptions(steps=300, seed=3))) == RlOptions(steps=300,
                                                                                   seed=3)


def test_runners_go_to_spot_nodes_and_the_learner_to_its_pool() -> None:
    options = RlOptions(env_runners=3, hidden=32, learning_rate=1e-3, eval_every=5)
    config = sac_config(options)
    # the Algorithm has no runners of its own: the driver starts them from this config
    assert config.num_env_runners == 0
    assert runner_actor_options(placement(options.runner_on)) == {
        "num_cpus": 1, "resources": {"spot": 1.0}, "max_restarts": -1, "max_task_retries": 0}
    assert trainer_options(options)["resources"] == {"learner": 1.0}
    assert not config.evaluation_interval  # the runners evaluate (workloads/rl/evaluation.py)
    assert config.callbacks_class.__name__ == "PeriodicEvaluation"
    assert config.model_config["fcnet_hiddens"] == [32, 32]  # the RLModule's networks
    assert config.actor_lr == config.critic_lr == config.alpha_lr == 1e-3
    assert placement("learner") == {"learner": 1.0}
    assert placement("on-demand") == {"on_demand": 1.0}
    assert placement("anywhere") == {}


def test_the_paper_preset_gives_the_seeds_settings_and_flags_beside_it_win() -> None:
    paper = RL_SPEC.parse(["--preset", "paper"])
    assert (paper.hidden, paper.learning_rate, paper.tau, paper.batch_size) == (
        256, 5e-4, 0.01, 128)
    assert (paper.updates_per_step, paper.eval_every, paper.eval_episodes) == (0.125, 24, 2)
    assert paper.steps > RlOptions().steps
    shorter = RL_SPEC.parse(["--preset", "paper", "--steps", "3000"])
    assert shorter.steps == 3000 and shorter.hidden == 256
    # the workload's command line gives the same options back, and they record the preset
    assert RL_SPEC.parse(RL_SPEC.argv(shorter)) == shorter
    assert shorter.parameters()["preset"] == "paper"
    with pytest.raises(OptionError, match="^--preset: expected one of paper"):
        RL_SPEC.parse(["--preset", "huge"])


def test_the_run_tasks_lab_preempts_by_schedule_and_its_flags_are_its_own() -> None:
    lab = RL_LAB_SPEC.default()
    assert (lab.alpha, lab.on_demand, lab.learner, lab.preempt_every) == (1.0, 0, 1, 8)
    assert lab.spot >= RlOptions().env_runners + 1  # a spare spot node takes a runner at once
    flags = [{o.dest for o in spec.user_options} for spec in (RL_SPEC, RL_LAB_SPEC, TARGET_SPEC)]
    assert not (flags[0] & flags[1]) and not (flags[0] & flags[2]) and not (flags[1] & flags[2])
    with pytest.raises(OptionError, match="^--preempt-every: expected an integer ≥ 0"):
        RL_LAB_SPEC.from_text({"preempt_every": "-1"})


def test_losing_the_learner_needs_a_second_learner_node_before_anything_starts() -> None:
    with pytest.raises(OptionError, match="^--lose-learner-at: needs --learner 2 or more"):
        RL_LAB_SPEC.from_text({"lose_learner_at": "5"})
    assert RL_LAB_SPEC.from_text({"lose_learner_at": "5", "learner": "2"}).lose_learner_at == 5


def test_the_local_labs_bill_takes_run_rls_on_demand_price() -> None:
    from launch.rl import rl_lab

    assert rl_lab(RlOptions(on_demand_price=0.5), RL_LAB_SPEC.default()).on_demand_price == 0.5
