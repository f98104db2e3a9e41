"""Survivor mode when every replica group is lost at once (workloads/elastic/replicas.py): the
next generation of groups starts from the newest checkpoint a group reported, on a local Ray
of two CPUs, the shipped torchft script (its checkpoint every 10 steps)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import ray

from workloads.elastic.experiment import run_experiment
from workloads.elastic.ledger import LEDGER_NAME_PREFIX
from workloads.elastic.options import ElasticOptions
from workloads.elastic.replicas import replica_group_name

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "elastic" / "torchft_digits.py"
WAIT_S = 600.0


def kill_every_group_after_a_checkpoint(killed: list[int]) -> None:
    """Once the run's first checkpoint is committed, kill both replica groups at once."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        ledgers = [n for n in ray.util.list_named_actors()
                   if n.startswith(LEDGER_NAME_PREFIX) and "-replica-" not in n]
        if ledgers:
            ledger = ray.get_actor(ledgers[0])
            if ray.get(ledger.latest_checkpoint.remote()):
                for number in (0, 1):
                    ray.kill(ray.get_actor(replica_group_name(ledgers[0], number)))
                    killed.append(number)
                return
        time.sleep(0.2)


def test_every_group_lost_resumes_from_the_newest_checkpoint(tmp_path: Path) -> None:
    ray.init(address="local", num_cpus=2, include_dashboard=False)
    killed: list[int] = []
    try:
        killer = threading.Thread(target=kill_every_group_after_a_checkpoint, args=(killed,),
                                  daemon=True)
        killer.start()
        options = ElasticOptions(script=SCRIPT, function="train_func", torchft=True,
                                 max_workers=2, preempt_at="600s", out=str(tmp_path),
                                 script_args="--steps 40 --checkpoint-every 10")
        summary: dict[str, Any] = run_experiment(options, print)
    finally:
        ray.shutdown()
    assert killed == [0, 1]
    assert summary["completed"] and summary["steps_done"] == 40, summary["error"]
    assert summary["preemptions"] == 2  # both lost with their "nodes"
    assert summary["resumed_from_checkpoint"] == 2  # the next generation, both groups
    assert summary["checkpoints_committed"] >= 2
    # the run ends long before its one --preempt-at point (and has no spot node for it)
    assert summary["preemption_points_not_reached"] == ["600s"]
    assert summary["preemption_schedule"] == []
    # the steps since the checkpoint were computed again, and nothing before it
    assert 0 <= summary["lost_steps"] <= summary["step_executions"] - 40
