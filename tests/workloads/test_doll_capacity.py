"""Spot capacity traces: the reader's checks, the replay's clock, who holds the instances
that exist, and the engine stepping through a falling and rising capacity (no Ray: a fleet
of plain slots)."""

import json
from pathlib import Path
from typing import Any

import pytest

from workloads.common.spot_market.capacity import (
    CapacityReplay,
    CapacityTrace,
    CapacityTraceError,
    load_capacity_trace,
    split_capacity,
)
from workloads.doll.fleet import Slot
from workloads.doll.options import DollOptions
from workloads.doll.policy_run import PolicyFailed, PolicyRun, Servers


def write(tmp_path: Path, document: Any, name: str = "trace.json") -> Path:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_a_trace_in_the_public_format_loads(tmp_path: Path) -> None:
    path = write(tmp_path, {"metadata": {"gap_seconds": 300}, "data": [4, 3.0, 0, 4]})
    trace = load_capacity_trace(path)
    assert trace.gap_s == 300.0 and trace.counts == (4, 3, 0, 4)
    assert trace.mean() == pytest.approx(2.75)


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ("{not json", "is not JSON"),
        ([1, 2], "expected an object"),
        ({"metadata": {"gap_seconds": 60}}, "has no 'data' list"),
        ({"metadata": {"gap_seconds": 60}, "data": []}, "'data' is empty"),
        ({"metadata": {"gap_seconds": 60}, "data": [2, -1]}, r"data\[1\] is -1"),
        ({"metadata": {"gap_seconds": 60}, "data": [2, 1.5]}, r"data\[1\] is 1.5"),
        ({"metadata": {"gap_seconds": 60}, "data": [True]}, r"data\[0\] is True"),
        ({"metadata": {"gap_seconds": 0}, "data": [1]}, "gap_seconds must be a number > 0"),
        ({"metadata": {"gap_seconds": -5}, "data": [1]}, "gap_seconds must be a number > 0"),
        ({"data": [1]}, "has no 'metadata'"),
        ("", "is not JSON"),
    ],
)
def test_a_malformed_trace_is_one_line_naming_the_file(
    tmp_path: Path, document: Any, problem: str
) -> None:
    path = write(tmp_path, document)
    with pytest.raises(CapacityTraceError, match=problem) as raised:
        load_capacity_trace(path)
    message = str(raised.value)
    assert message.startswith(f"--capacity-trace: {path}") and "\n" not in message


def test_a_missing_trace_names_the_flag_and_file(tmp_path: Path) -> None:
    with pytest.raises(CapacityTraceError, match="--capacity-trace: .*missing.json"):
        load_capacity_trace(tmp_path / "missing.json")


def test_the_replay_compresses_time_like_the_price_trace_and_loops() -> None:
    trace = CapacityTrace(Path("t.json"), 300.0, (5, 4, 3))
    replay = CapacityReplay(trace, compression=2000.0)
    # a tick of 300 trace seconds lasts 0.15 wall seconds at 2000×
    assert [replay.capacity_at(t) for t in (0.0, 0.149, 0.15, 0.31, 0.45)] == [5, 5, 4, 3, 5]
    assert CapacityReplay.seeded(trace, 2000.0, 0).offset_s == 0.0
    offsets = {CapacityReplay.seeded(trace, 2000.0, seed).offset_s for seed in range(1, 30)}
    assert offsets <= {0.0, 300.0, 600.0} and len(offsets) > 1


def test_instances_held_keep_their_place_and_the_newest_go_first() -> None:
    granted, noticed = split_capacity(3, [0, 1, 2, 3], [])
    assert (granted, noticed) == ([0, 1, 2], [])
    granted, noticed = split_capacity(1, [0, 1, 2, 3], [2, 0, 1])
    assert (granted, noticed) == ([2], [0, 1])
    granted, noticed = split_capacity(3, [0, 1, 2, 3], [2])
    assert (granted, noticed) == ([2, 0, 1], [])
    # a worker the policy moved off spot frees its instance without a notice
    assert split_capacity(2, [1, 3], [0, 1]) == ([1, 3], [])


class PlainFleet:
    def __init__(self, workers: int) -> None:
        self.slots = [Slot(index, 1.0) for index in range(workers)]

    def set_up(self, slot: Slot, up: bool) -> None:
        slot.up = up


def test_a_falling_capacity_preempts_and_a_rising_one_lets_spot_back() -> None:
    # 1 s ticks at compression 1: capacity 4, then 1, then 3
    trace = CapacityTrace(Path("t.json"), 1.0, (4, 4, 1, 1, 3, 3))
    config = DollOptions(workers=4, k=1, refresh_s=1.0, policies=("static",),
                         capacity_trace=Path("t.json"), compression=1.0, warning_s=None)
    fleet: Any = PlainFleet(4)
    run = PolicyRun("static", config, Servers(fleet, None, None, None, 0.09, trace),
                    say=lambda line: None)
    run.spot = {0, 1, 2, 3}
    run.update_capacity(0.0)
    run.grant(0.0)
    run._apply_states(0.0)
    running = []
    for now in range(1, 6):
        run.bill(float(now))
        run.step(float(now))
        run._apply_states(float(now))
        running.append(sum(slot.up for slot in fleet.slots))
    assert running == [4, 1, 1, 3, 3]
    assert all(row["spot_running"] <= row["spot_capacity"] for row in run.capacity_rows)
    assert [row["spot_capacity"] for row in run.capacity_rows] == [4, 1, 1, 3, 3]
    assert run.preemptions == 3
    assert [e["event"] for e in run.events].count("notice") == 3
    # billed: 4 spot instances up for 2 s, 1 for 2 s, 3 for 1 s
    assert run.meter.spot_up_s == pytest.approx(4 * 2 + 1 * 2 + 3 * 1)


def test_the_lab_under_cant_be_late_rules_decides_per_tick_and_holds_each_launch() -> None:
    # the lab's engine (plain slots, no Ray), 1 s ticks at compression 1, a 2 s overhead
    trace = CapacityTrace(Path("t.json"), 1.0, (1, 1, 1, 0, 0, 1, 1, 1))
    config = DollOptions(workers=1, k=1, refresh_s=0.5, policies=("static",),
                         capacity_trace=Path("t.json"), compression=1.0,
                         rules="cant-be-late", launch_delay_s=2.0, start=0)
    fleet: Any = PlainFleet(1)
    run = PolicyRun("static", config, Servers(fleet, None, None, None, 0.09, trace),
                    say=lambda line: None)
    run.update_capacity(0.0)
    run.decided(0.0, [0])
    assert not run.decision_due(0.5, scheduled=True, price_changed=True)  # within the tick
    assert run.decision_due(1.0, scheduled=False, price_changed=False)  # a new tick
    times = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 4.5, 5.0, 6.0, 6.5, 7.0, 7.5)
    up = []
    for now in times:
        run.bill(now)
        run.step(now)
        run._apply_states(now)
        up.append(fleet.slots[0].up)
    # launched at 0: no data until 2; preempted at 3; back at 5, again 2 s of overhead
    assert up == [False] * 3 + [True] * 2 + [False] * 6 + [True] * 2
    assert run.meter.spot_up_s == pytest.approx(3.0 + 2.5)  # billed through its overheads
    assert run.preemptions == 1
    with pytest.raises(PolicyFailed, match="capacity trace t.json ended"):
        run.step(8.0)  # the trace ends the run instead of looping
