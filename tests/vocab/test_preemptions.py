"""The schedule language of `--preemptions` and the preemption record."""

from __future__ import annotations

import pytest

from vocab.preemptions import (
    CAUSE_REBALANCE,
    RECORD_FIELDS,
    PreemptionSchedule,
    ScheduleError,
    parse_schedule,
    preemption_record,
)


@pytest.mark.parametrize(("text", "schedule"), [
    ("model", PreemptionSchedule("model")),
    (" none ", PreemptionSchedule("none")),
    ("at:90", PreemptionSchedule("at", (90.0,))),
    ("at:5m,90s,1h,2.5", PreemptionSchedule("at", (2.5, 90.0, 300.0, 3600.0))),
    ("at: 30 , 30", PreemptionSchedule("at", (30.0, 30.0))),  # twice: two nodes
])
def test_schedules_read(text: str, schedule: PreemptionSchedule) -> None:
    assert parse_schedule(text) == schedule
    assert parse_schedule(schedule.text) == schedule  # what provenance records reads back


@pytest.mark.parametrize(("text", "complaint"), [
    ("markov", "'markov' is not a schedule"),
    ("at:", "names no time"),
    ("at:5x", "'5x' is not a time"),
    ("at:-5", "'-5' is not a time"),
    ("at:0", "after the start"),
    ("at:8d", "'8d' is not a time"),
    ("at:200h", "within a week"),
    ("at:1m,,2m", "'' is not a time"),
    ("120,start,10s", "not a schedule"),  # elastic's progress points are not times
])
def test_a_bad_schedule_names_the_part(text: str, complaint: str) -> None:
    with pytest.raises(ScheduleError, match=complaint):
        parse_schedule(text)


def test_a_record_has_every_field_and_a_known_cause() -> None:
    row = preemption_record(cause=CAUSE_REBALANCE, node="spot-1", notice_at=None)
    assert tuple(row) == RECORD_FIELDS
    assert row["cause"] == "rebalance" and row["gone_at"] is None
    with pytest.raises(TypeError, match="not preemption record fields"):
        preemption_record(cause="notice", when=1.0)
    with pytest.raises(ValueError, match="cause must be"):
        preemption_record(cause="price")
