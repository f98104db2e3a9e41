"""Policies as objects on one interface: the built-ins' decisions on hand-made states, the
user's file checked before anything starts, and a decide that raises, answers badly or too
late failing its own run in one line (no Ray: a fleet of plain slots)."""

import asyncio
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from workloads.common.options import OptionError
from workloads.doll.experiment import check_inputs
from workloads.doll.fleet import Slot
from workloads.doll.options import DollOptions
from workloads.doll.policies import (
    BUILTINS,
    PolicyFileError,
    PolicyState,
    UniformProgress,
    checked_spot_set,
    make_policy,
    policy_name,
)
from workloads.doll.policy_run import PolicyFailed, PolicyRun, Servers

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "doll" / "keep_ahead.py"


def state(**given: Any) -> PolicyState:
    values: dict[str, Any] = dict(
        workers=4, rates=(12.0,) * 4, time_s=0.0, deadline_s=100.0, batches_done=0,
        batches_total=1000, batch_size=1, spot_price=0.1, on_demand_price=0.3,
        spot_capacity=None, spot_up=(True,) * 4, spot=frozenset(), price_changed=False,
        observed_rates=None, spot_s=0.0, spot_up_s=0.0,
    )
    values.update(given)
    return PolicyState(**values)


CONFIG = DollOptions(workers=4, k=1, refresh_s=1.0, launch_delay_s=4.0,
                     compression=2.0)  # d = 4 trace seconds at 2x: 2 s


def test_every_built_in_is_an_object_with_decide() -> None:
    for name in BUILTINS:
        policy = make_policy(name, CONFIG)
        assert {int(i) for i in policy.decide(state())} <= set(range(4)), name
        assert policy_name(name) == name


def test_uniform_progress_exploits_spot_then_catches_up_on_demand_with_hysteresis() -> None:
    policy = UniformProgress(CONFIG)
    everyone = frozenset(range(4))
    assert set(policy.decide(state())) == set(everyone)  # exploitation: all on spot
    # behind the line (t=50: 500 batches due) with workers 1 and 2 preempted
    down = (True, False, False, True)
    chosen = set(policy.decide(state(time_s=50.0, batches_done=480, spot=everyone,
                                     spot_up=down)))
    assert chosen == {0, 3}
    # back on the line but not 2d = 4 s ahead of it: hysteresis keeps them on demand
    chosen = set(policy.decide(state(time_s=51.0, batches_done=512, spot=frozenset(chosen))))
    assert chosen == {0, 3}
    # 2d ahead (line at t+4 = 550): back to spot
    assert set(policy.decide(state(time_s=51.0, batches_done=551, spot=frozenset(chosen)))) \
        == set(everyone)


def test_uniform_progress_safety_net_moves_idle_workers_on_demand_for_good() -> None:
    policy = UniformProgress(CONFIG)
    policy.decide(state())
    # 400 points left at 48 points/s is 8.3 s, + 2d = 12.3 s: more than the 10 s left;
    # the workers up stay on spot (exploitation), the idle one goes on demand to the end
    everyone = frozenset(range(4))
    assert set(policy.decide(state(time_s=89.0, batches_done=900, spot=everyone,
                                   spot_up=(True, False, True, True)))) == everyone
    chosen = set(policy.decide(state(time_s=90.0, batches_done=600, spot=everyone,
                                     spot_up=(True, False, True, True))))
    assert chosen == {0, 2, 3}
    # back up and far ahead of the line: the safety net still holds it on demand
    assert set(policy.decide(state(time_s=91.0, batches_done=990, spot=frozenset(chosen)))) \
        == {0, 2, 3}


def test_uniform_progress_uses_no_spot_while_it_is_not_cheaper() -> None:
    assert list(UniformProgress(CONFIG).decide(state(spot_price=0.5))) == []


class PlainFleet:
    def __init__(self, workers: int) -> None:
        self.slots = [Slot(index, 1.0) for index in range(workers)]

    def set_up(self, slot: Slot, up: bool) -> None:
        slot.up = up


def write_policy(tmp_path: Path, body: str, name: str = "mine.py") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def engine(tmp_path: Path, body: str, interval_s: float = 1.0) -> PolicyRun:
    path = write_policy(tmp_path, body)
    config = DollOptions(workers=4, k=1, refresh_s=0.5, adapt_interval_s=interval_s,
                         policies=(f"{path}:Mine",))
    fleet: Any = PlainFleet(4)
    run = PolicyRun(f"{path}:Mine", config, Servers(fleet, None, None, None, 0.09),
                    say=lambda line: None)
    run.price = 0.09
    run.start = time.monotonic()
    return run


GOOD = "class Mine:\n    def decide(self, state):\n        return [0, state.workers - 1]\n"


def test_a_user_policy_decides_like_a_built_in(tmp_path: Path) -> None:
    run = engine(tmp_path, GOOD)
    assert run.name == "Mine"
    asyncio.run(run._decide(0.0, False))
    assert run.spot == {0, 3}


@pytest.mark.parametrize(
    ("answer", "spot"),
    [(range(4), {0, 1, 2, 3}), (range(3, 0, -2), {1, 3}), (range(0), set()), ([2, 0], {0, 2}),
     ((1,), {1}), (frozenset({3}), {3}), ([], set()), (iter([1, 1]), {1})],
)
def test_an_answer_is_any_collection_of_worker_indices(answer: Any, spot: set[int]) -> None:
    assert checked_spot_set(answer, 4) == spot


@pytest.mark.parametrize(
    ("answer", "reason"),
    [(range(5), r"decide returned worker 4, outside range\(4\)"),
     (range(-1, 2), r"decide returned worker -1, outside range\(4\)"),
     ([0, True], "decide returned True, not a worker index"),
     ((1, 2.0), "decide returned 2.0, not a worker index"),
     ({0, 7}, r"decide returned worker 7, outside range\(4\)"),
     (3, "decide returned int, not a collection of worker indices")],
)
def test_an_answer_that_is_not_worker_indices_is_refused(answer: Any, reason: str) -> None:
    with pytest.raises(ValueError, match=f"^{reason}$"):
        checked_spot_set(answer, 4)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("class Mine:\n    def decide(self, state):\n        return [4]\n",
         r"decide returned worker 4, outside range\(4\)"),
        ("class Mine:\n    def decide(self, state):\n        return ['0']\n",
         "decide returned '0', not a worker index"),
        ("class Mine:\n    def decide(self, state):\n        return None\n",
         "decide returned NoneType"),
        ("class Mine:\n    def decide(self, state):\n        return 1 / 0\n",
         "decide raised ZeroDivisionError: division by zero"),
        ("import time\nclass Mine:\n    def decide(self, state):\n        time.sleep(5)\n",
         r"decide took longer than the decision interval \(--adapt-interval 0.2 s\)"),
    ],
)
def test_a_failing_policy_fails_its_own_run_in_one_line(
    tmp_path: Path, body: str, reason: str
) -> None:
    run = engine(tmp_path, body, interval_s=0.2)
    with pytest.raises(PolicyFailed, match=f"policy Mine failed at t=0.0s: {reason}") as raised:
        asyncio.run(run._decide(0.0, False))
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("class Other:\n    pass\n", "defines no class Mine at its top level"),
        ("class Mine(\n", "was never closed"),
        ("raise RuntimeError('no')\nclass Mine:\n    def decide(self, s):\n        return []\n",
         "fails to import: RuntimeError: no"),
        ("class Mine:\n    pass\n", r"has no decide\(self, state\) method"),
    ],
)
def test_a_bad_policy_file_is_one_line_before_anything_starts(
    tmp_path: Path, body: str, problem: str
) -> None:
    path = write_policy(tmp_path, body)
    options = DollOptions(policies=("static", f"{path}:Mine"))
    with pytest.raises(PolicyFileError, match=problem) as raised:
        check_inputs(options)
    assert str(raised.value).startswith(f"--policy: {path}")


def test_a_missing_policy_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError, match="no such file"):
        check_inputs(DollOptions(policies=(f"{tmp_path}/none.py:Mine",)))


def test_policy_entries_are_built_ins_or_file_and_class() -> None:
    with pytest.raises(OptionError, match="--policy: 'statik' is neither a built-in"):
        DollOptions(policies=("statik",))
    with pytest.raises(OptionError, match="one file per run"):
        DollOptions(policies=("a.py:One", "b.py:Two"))
    with pytest.raises(OptionError, match="two policies go by one name"):
        DollOptions(policies=("x/a.py:One", "a.py:One"))


def test_the_documented_example_loads_and_keeps_ahead() -> None:
    options = DollOptions(policies=(f"{EXAMPLE}:KeepAhead",))
    check_inputs(options)
    policy = make_policy(options.policies[0], options)
    assert list(policy.decide(state())) == [0, 1, 2, 3]
    behind = state(time_s=50.0, batches_done=100, spot=frozenset({0, 1}),
                   spot_up=(False, True, True, True))
    assert list(policy.decide(behind)) == [1]
    assert list(policy.decide(replace(behind, spot_price=0.4))) == []
