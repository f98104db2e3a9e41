"""`invoke run-rl`'s launcher: a bad environment is refused before any lab starts, the local
lab gets a learner node when the learner is to be placed on one, and the run's preemption
schedule interrupts the nodes its output lines name."""

from __future__ import annotations

from typing import Any

import pytest

from launch.options import RlLabOptions
from launch.rl import LabFaults, rl_lab, run_rl
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
    assert rl_lab(RlOptions(), RlLabOptions()).alpha == 1.0  # only the schedule preempts


class FakeLab:
    """The parts of a SpotLab that LabFaults uses: its join events and interrupt()."""

    def __init__(self, nodes: dict[str, str]) -> None:
        self.joined = [{"event": "join", "node": name, "ray_node_id": ray_id}
                       for name, ray_id in nodes.items()]
        self.interrupted: list[str] = []

    def events(self) -> list[dict[str, Any]]:
        return self.joined

    def interrupt(self, node: str) -> None:
        self.interrupted.append(node)


def _iteration(number: int, healthy: int = 2) -> str:
    return (f"iteration {number}: {100 * number}/3000 env steps, train return -900.0, "
            f"env runners {healthy}/2, restarts 0, 4.0 s")


def test_every_nth_iteration_preempts_a_runner_node_not_preempted_before() -> None:
    lab = FakeLab({"spot-0": "aa11", "spot-1": "bb22", "spot-2": "cc33", "learner-0": "ll44"})
    faults = LabFaults(preempt_every=2, lose_learner_at=None, lab=lab)  # type: ignore[arg-type]
    # iteration 30 is the last of 3000 env steps
    for line in ["learner (Trainer) on node ll44; 2 env runners on spot nodes",
                 "env runners on nodes: aa11, bb22", _iteration(1), _iteration(2),
                 "spot node aa11 lost; training goes on with 1/2 env runners", _iteration(3, 1),
                 "env runners on nodes: bb22, cc33", _iteration(4), _iteration(5)]:
        faults.feed(line)
    assert lab.interrupted == ["spot-0", "spot-1"]
    assert [f["after_iteration"] for f in faults.record()["injected"]] == [2, 4]
    faults.feed(_iteration(4))  # the same iteration again (after a learner resume): no fault
    faults.feed("env runners on nodes: cc33, dd44")
    faults.feed(_iteration(30))  # the last: the run ends, nothing to preempt for
    assert lab.interrupted == ["spot-0", "spot-1"]


def test_the_learner_is_lost_once_the_runners_are_back_in_service() -> None:
    lab = FakeLab({"spot-0": "aa11", "spot-1": "bb22", "spot-2": "cc33", "learner-0": "ll44"})
    faults = LabFaults(preempt_every=3, lose_learner_at=3, lab=lab)  # type: ignore[arg-type]
    for line in ["learner (Trainer) on node ll44; 2 env runners on spot nodes",
                 "env runners on nodes: aa11, bb22", _iteration(1), _iteration(2),
                 _iteration(3), _iteration(4, 1)]:
        faults.feed(line)
    assert lab.interrupted == ["spot-0"]  # iteration 3 preempted; the learner waits
    faults.feed("env runners on nodes: aa11, cc33")  # 2/2, one still on the preempted node
    faults.feed(_iteration(5))
    assert lab.interrupted == ["spot-0"]
    faults.feed("env runners on nodes: bb22, cc33")
    faults.feed(_iteration(6, 2))
    assert lab.interrupted == ["spot-0", "spot-1"]  # the schedule's second preemption
    faults.feed("env runners on nodes: cc33, dd44")
    faults.feed(_iteration(7))
    assert lab.interrupted == ["spot-0", "spot-1", "learner-0"]
    faults.feed(_iteration(8))
    assert lab.interrupted == ["spot-0", "spot-1", "learner-0"]  # once
