"""The spot lab's capacity model: a spot capacity trace decides which spot slots have
capacity, and each fall is an interruption of the slots above the new count (the lab then
sends those nodes the real notice, drains and kills them, as for any interruption)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotlab.capacity import SpotCapacity
from spotlab.config import SpotLabConfig, SpotLabConfigError
from spotlab.options import LAB_SPEC


def trace(tmp_path: Path, data: list[int], gap: float = 10.0) -> str:
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps({"metadata": {"gap_seconds": gap}, "data": data}))
    return str(path)


def test_slots_above_the_count_have_no_capacity_and_each_fall_interrupts_them(
    tmp_path: Path,
) -> None:
    # 10 s ticks at 10 trace seconds per lab second: one tick per lab second
    config = SpotLabConfig(spot=3, capacity_trace=trace(tmp_path, [3, 1, 1, 2, 0, 3]),
                           trace_compression=10.0)
    capacity = SpotCapacity(config)
    assert capacity.model == "capacity"
    assert [capacity.available(t) for t in (0.5, 1.5, 3.5, 4.5, 5.5)] == [
        [True] * 3, [True, False, False], [True, True, False], [False] * 3, [True] * 3]
    falls = [(i.t, i.slot) for i in capacity.interruptions_between(0.0, 6.5)]
    assert falls == [(1.0, 1), (1.0, 2), (4.0, 0), (4.0, 1)]
    # it loops: the fall from 3 to 1 again after 6 s
    assert [(i.t, i.slot) for i in capacity.interruptions_between(6.5, 7.5)] == [(7.0, 1),
                                                                               (7.0, 2)]


def test_counts_above_the_lab_interrupt_only_the_slots_it_has(tmp_path: Path) -> None:
    config = SpotLabConfig(spot=2, capacity_trace=trace(tmp_path, [16, 12, 1]),
                           trace_compression=10.0)
    assert [(i.t, i.slot) for i in SpotCapacity(config).interruptions_between(0.0, 2.5)] \
        == [(2.0, 1)]


def test_the_flag_reaches_the_lab_and_a_bad_trace_is_one_line(tmp_path: Path) -> None:
    path = trace(tmp_path, [2, 1])
    assert LAB_SPEC.parse(["--capacity-trace", path]).config().capacity_trace == path
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"metadata": {"gap_seconds": 10}, "data": [1, 0.5]}))
    with pytest.raises(ValueError, match=r"--capacity-trace: .*bad.json: data\[1\] is 0.5"):
        LAB_SPEC.parse(["--capacity-trace", str(bad)])
    with pytest.raises(SpotLabConfigError, match="does not go with --preemptions"):
        SpotLabConfig(capacity_trace=path, preemptions="none")


@pytest.mark.ray
def test_a_fall_in_capacity_sends_the_real_notice_and_a_rise_starts_a_replacement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spotlab import spot_lab
    from spotlab.state import STATE_DIR_ENV
    from tests.helpers.waiting import wait_until

    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    # one tick per lab second: capacity for 8 s, none for 6 s, then back
    config = SpotLabConfig(spot=1, on_demand=0, cpus_per_node=1, warning_s=3.0,
                           replace_delay_s=1.0, object_store_mb=80, dashboard=False,
                           capacity_trace=trace(tmp_path, [1] * 8 + [0] * 6 + [1] * 200, 1.0),
                           trace_compression=1.0)
    with spot_lab(config) as lab:
        wait_until(lambda: any(e["event"] == "replacement-started" for e in lab.events()), 180,
                   "the replacement once capacity is back")
        events = lab.events()
    notice = next(e for e in events if e["event"] == "notice" and e["node"] == "spot-0")
    kill = next(e for e in events if e["event"] == "kill" and e["node"] == "spot-0")
    started = next(e for e in events if e["event"] == "replacement-started")
    assert kill["cause"] == "notice" and notice["t"] < kill["t"] <= started["t"]
    assert started["slot"] == 0 and started["replaces"] == "spot-0"
