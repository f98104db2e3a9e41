"""Ray's node table as a run on a stack watches it (launch/preempt.py's RayNodeWatcher, through
the dashboard with the cluster's token), on a spot lab with real Ray nodes and one scheduled
interruption: the noticed node is listed ended (by its kill), drained for a preemption first,
its replacement started after the notice, and the stack's record is made from that table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from launch.preempt import RayNodeWatcher, stack_preemption_records
from spotlab import SpotLabConfig, spot_lab
from spotlab.state import STATE_DIR_ENV
from tests.helpers.waiting import wait_until
from vocab.preemptions import RECORD_FIELDS

pytestmark = pytest.mark.ray

CONFIG = SpotLabConfig(spot=1, on_demand=0, cpus_per_node=1, preemptions="at:3", warning_s=3.0,
                       replace_delay_s=1.0, object_store_mb=80, dashboard=True)


def first(events: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(e for e in events if e["event"] == kind)


def test_the_node_table_shows_the_interrupted_node_drained_ended_and_replaced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "spotlabs"))
    with spot_lab(CONFIG) as lab:
        assert lab.dashboard_url is not None
        with RayNodeWatcher(lab.dashboard_url, lab.token(), poll_s=0.2) as watcher:
            def replaced() -> list[dict[str, Any]] | None:
                seen = lab.events()
                join = [e for e in seen if e["event"] == "join" and e.get("replaces")]
                return seen if join and join[0]["ray_node_id"] in watcher.nodes else None

            events = list(wait_until(replaced, 240.0, "the interruption and its replacement"))
            notice = first(events, "notice")
            wait_until(lambda: watcher.nodes[notice["ray_node_id"]].ended_at, 60.0,
                       "Ray listing the interrupted node dead")
    assert watcher.errors == 0
    kill = first(events, "kill")
    join = first([e for e in events if e.get("replaces")], "join")
    interrupted = watcher.nodes[notice["ray_node_id"]]
    assert interrupted.ended_at is not None
    # a node drained by its agent ends at the drain's deadline, before the kill
    assert notice["t"] < interrupted.ended_at <= kill["t"] + 30.0
    assert interrupted.drained_for_preemption, interrupted.state_message  # the agent's drain
    replacement = watcher.nodes[join["ray_node_id"]]
    assert replacement.started_at is not None and replacement.started_at > notice["t"]
    assert replacement.ended_at is None
    assert sum(1 for node in watcher.nodes.values() if node.is_head) == 1

    # the record a stack run writes, from an experiment whose action began at this notice
    experiment = {"pool": "spot-cpu", "scheduled_at": notice["t"] - 0.5,
                  "started_at": notice["t"] - 0.4, "action_started_at": notice["t"],
                  "instance_ids": ["i-0"]}
    (row,) = stack_preemption_records([experiment], watcher.nodes.values(),
                                      warning_s=CONFIG.warning_s)
    assert tuple(row) == RECORD_FIELDS
    assert row["ray_node_id"] == notice["ray_node_id"] and row["gone_at"] == interrupted.ended_at
    assert row["replacement_joined_at"] == replacement.started_at
