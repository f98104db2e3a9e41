"""A spot lab with an explicit schedule and rebalance recommendations, real Ray nodes: the
recommendation reaches the node and its agent, the node group's answer (a replacement, then
the old node drained once it joined) removes that node before any notice, the other
interruption of the same moment is a notice, and the records say which was which."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spotlab import SpotLab, SpotLabConfig, spot_lab
from spotlab.report import preemption_records
from spotlab.state import STATE_DIR_ENV
from tests.helpers.waiting import wait_until
from vocab.preemptions import RECORD_FIELDS

pytestmark = pytest.mark.ray

AT_S = 30.0
CONFIG = SpotLabConfig(spot=2, on_demand=0, cpus_per_node=1, preemptions=f"at:{AT_S:g},{AT_S:g}",
                       rebalance_chance=0.5, rebalance_lead_s=AT_S, warning_s=4.0,
                       replace_delay_s=1.0, object_store_mb=80, dashboard=False, seed=0)
"""Two interruptions at 30 s, both within the lead from the start; with seed 0 the first is
announced by a recommendation (to spot-1, drawn), the second is not."""


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[dict[str, Any]]]:
    directory = tmp_path_factory.mktemp("spotlab-state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_DIR_ENV, str(directory))
        with spot_lab(CONFIG) as lab:
            yield wait_for_both(lab)


def wait_for_both(lab: SpotLab) -> list[dict[str, Any]]:
    """Until the rebalanced node is gone and the noticed one killed, and both replaced."""
    def done() -> list[dict[str, Any]] | None:
        seen = lab.events()
        kills = [e for e in seen if e["event"] == "kill"]
        joins = [e for e in seen if e["event"] == "join" and e.get("replaces")]
        return seen if len(kills) >= 2 and len(joins) >= 2 else None

    return list(wait_until(done, AT_S + 240, "both interruptions and their replacements"))


def one(events: list[dict[str, Any]], kind: str, **match: Any) -> dict[str, Any]:
    found = [e for e in events if e["event"] == kind
             and all(e.get(key) == value for key, value in match.items())]
    assert len(found) == 1, (kind, match, found)
    return found[0]


def test_the_recommendation_reaches_the_node_and_its_agent_ahead_of_time(
        events: list[dict[str, Any]]) -> None:
    rebalance = one(events, "rebalance")
    assert rebalance["node"] == "spot-1"
    up = min(e["t"] for e in events if e["event"] == "join")
    assert rebalance["scheduled_at"] - up == pytest.approx(AT_S, abs=1.0)
    assert rebalance["lead_s"] > AT_S - 5.0
    seen = one(events, "agent-rebalance", node="spot-1")
    assert rebalance["t"] <= seen["t"] < rebalance["scheduled_at"]
    assert seen["recommended_at"] == pytest.approx(rebalance["t"], abs=0.01)
    assert not [e for e in events if e["event"] == "agent-drain" and e["node"] == "spot-1"
                and e["cause"] == "rebalance"]  # recorded, not drained: not asked to


def test_the_node_group_replaces_the_node_then_drains_it_before_any_notice(
        events: list[dict[str, Any]]) -> None:
    rebalance = one(events, "rebalance")
    started = one(events, "replacement-started", replaces="spot-1")
    assert started["after_rebalance"] is True
    assert rebalance["t"] <= started["t"] < rebalance["scheduled_at"]
    joined = one(events, "join", node=started["node"])
    drained = one(events, "rebalance-drain", node="spot-1")
    kill = one(events, "kill", node="spot-1")
    assert joined["t"] <= drained["t"] < kill["t"]
    assert kill["cause"] == "rebalance"
    assert kill["t"] - drained["t"] <= CONFIG.budget().grace_period_s + 1.0
    assert not [e for e in events if e["event"] == "notice" and e["node"] == "spot-1"]


def test_the_other_interruption_is_a_notice_the_agent_drains_at(
        events: list[dict[str, Any]]) -> None:
    notice = one(events, "notice")
    up = min(e["t"] for e in events if e["event"] == "join")
    assert notice["scheduled_at"] - up == pytest.approx(AT_S, abs=1.0)
    assert notice["t"] >= notice["scheduled_at"]
    drain = next(e for e in events if e["event"] == "agent-drain" and e["node"] == notice["node"])
    assert drain["accepted"] and drain["cause"] == "notice"
    assert notice["t"] <= drain["t"] < drain["deadline"]
    assert drain["deadline"] == pytest.approx(notice["deadline"]
                                              - CONFIG.budget().deadline_margin_s, abs=0.01)


def test_the_records_say_which_was_which(events: list[dict[str, Any]], tmp_path: Path) -> None:
    rows = {row["cause"]: row for row in preemption_records(events)}
    assert sorted(rows) == ["notice", "rebalance"]
    assert all(tuple(row) == RECORD_FIELDS for row in rows.values())
    rebalanced, noticed = rows["rebalance"], rows["notice"]
    assert rebalanced["node"] == "spot-1" and rebalanced["notice_at"] is None
    assert rebalanced["rebalance_at"] < rebalanced["gone_at"]
    assert rebalanced["replacement_joined_at"] < rebalanced["gone_at"]  # replaced first
    assert noticed["rebalance_at"] is None
    assert noticed["notice_at"] < noticed["drain_seen_at"] < noticed["gone_at"]
    assert noticed["gone_at"] >= noticed["notice_at"] + CONFIG.warning_s - 0.01  # not early
    assert noticed["replacement_joined_at"] > noticed["gone_at"]
    assert rebalanced["scheduled_at"] == pytest.approx(noticed["scheduled_at"], abs=0.01)
