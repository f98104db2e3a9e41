"""The step accounting on known ledgers (workloads/elastic/summary.py) and the preemption
schedule's points (workloads/elastic/schedule.py, progress.py): lost steps whatever rank
recorded them, restarts and their causes, notices honoured only when Ray Train committed
the checkpoint by the deadline (and why not), notices before a group's first step."""

from __future__ import annotations

from typing import Any

import pytest

from workloads.elastic.progress import preempt_line, preempt_request
from workloads.elastic.schedule import (
    GroupView,
    Schedule,
    ScheduleError,
    fire_if_due,
    parse_schedule,
    spot_node_to_interrupt,
)
from workloads.elastic.summary import summarize


def steps(attempt: int, first: int, last: int, t0: float, ranks: tuple[int, ...] = (0, 1),
          kind: str = "step", world_size: int = 2) -> list[dict[str, Any]]:
    return [{"attempt": attempt, "rank": rank, "step": step, "t": t0 + (step - first) * 0.5,
             "kind": kind, "world_size": world_size}
            for step in range(first, last + 1) for rank in ranks]


def record(**rows: Any) -> dict[str, Any]:
    base: dict[str, Any] = {name: [] for name in (
        "groups", "attempts", "workers", "steps", "reports", "commits", "notices",
        "controller", "holds", "decisions", "schedule", "hints")}
    return {**base, "final": {}, "total_steps": None, **rows}


def test_a_notice_checkpoint_committed_before_the_deadline_loses_nothing() -> None:
    ledger = record(
        total_steps=15,
        groups=[{"group": 0, "t": 0.0, "world_size": 3, "nodes": ["a", "b", "c"]},
                {"group": 1, "t": 18.0, "world_size": 2, "nodes": ["a", "b"]}],
        attempts=[{"attempt": 0, "t": 0.5, "world_size": 3, "resumed_steps": 0},
                  {"attempt": 1, "t": 18.5, "world_size": 2, "resumed_steps": 10,
                   "resumed_from": "ck/10"}],
        steps=steps(0, 0, 9, 1.0, ranks=(0, 2), world_size=3) + steps(1, 10, 14, 20.0),
        notices=[{"attempt": 0, "rank": 2, "source": "imds", "t": 5.2, "deadline": 9.0},
                 {"attempt": 0, "rank": 0, "agreed": True, "source": "imds", "step": 9,
                  "t": 5.6}],
        reports=[{"attempt": 0, "rank": 0, "index": 1, "steps_covered": 10,
                  "checkpoint": "ck/10", "reason": "notice", "t": 5.8},
                 {"attempt": 0, "rank": 1, "index": 1, "steps_covered": 10,
                  "checkpoint": None, "reason": "notice", "t": 5.8}],
        commits=[{"t": 6.3, "attempt": 0, "index": 1, "checkpoint": "ck/10",
                  "metrics": {"loss": 0.5, "step": 9}}],
        controller=[{"t": 6.0, "state": "PREEMPTING", "deadline": 9.0}],
        final={"t": 30.0, "test_accuracy": 0.97},
    )
    summary = summarize(ledger, started=0.0, ended=31.0)
    assert summary["completed"] and summary["steps_done"] == 15 and summary["lost_steps"] == 0
    assert summary["step_executions"] == 15  # two ranks recorded each step: once per group
    [restart] = summary["restarts"]
    assert restart["cause"] == "preemption" and restart["resumed_from_step"] == 9
    assert restart["time_to_resume_s"] == pytest.approx(20.0 - 5.2)
    assert summary["preemptions"] == 1
    [notice] = summary["notice_details"]
    assert notice["honoured"] and not notice["during_startup"]
    assert notice["checkpoint_step"] == 9 and notice["committed"] == pytest.approx(6.3)
    assert "2.7 s before the deadline" in notice["why"]
    assert summary["final_metrics"] == {"test_accuracy": 0.97}
    assert summary["metric"] == "loss"  # the first the script reported
    assert summary["rescales"] == [{"t": 18.5, "cause": "preemption", "workers_before": 3,
                                    "workers_after": 2}]


def test_a_checkpoint_reported_but_not_committed_is_not_honoured_and_its_steps_are_lost(
) -> None:
    """The start-up case: the notice came while the group started, its first step was
    checkpointed 0.36 s before the kill, Ray Train never committed it; the restart began at
    step 0. Only rank 1 recorded step 0 in group 1 (rank 0 died with its node): still lost."""
    ledger = record(
        groups=[{"group": 0, "t": 0.0, "world_size": 2, "nodes": ["a", "b"]},
                {"group": 1, "t": 20.0, "world_size": 1, "nodes": ["b"]}],
        attempts=[{"attempt": 0, "t": 1.0, "world_size": 2, "resumed_steps": 0},
                  {"attempt": 1, "t": 21.0, "world_size": 1, "resumed_steps": 0}],
        steps=steps(0, 0, 0, 6.0, ranks=(1,), kind="step") + steps(1, 0, 5, 22.0, ranks=(0,)),
        notices=[{"attempt": 0, "rank": 0, "source": "imds", "t": 4.0, "deadline": 10.0}],
        reports=[{"attempt": 0, "rank": 0, "index": 1, "steps_covered": 1,
                  "checkpoint": "ck/1", "reason": "notice", "t": 9.64}],
        controller=[{"t": 10.5, "state": "RESTARTING", "preemption": True,
                     "error": "PreemptionError"}],
    )
    summary = summarize(ledger, started=0.0, ended=30.0)
    assert summary["lost_steps"] == 1 and summary["preemptions"] == 1
    [notice] = summary["notice_details"]
    assert notice["during_startup"] and not notice["honoured"]
    assert "0.4 s before the deadline but Ray Train never committed it" in notice["why"]
    assert summary["notices_honoured"] == 0 and summary["notices"] == 1


def test_a_notice_before_the_first_step_is_honoured_with_nothing_to_save() -> None:
    ledger = record(
        groups=[{"group": 0, "t": 0.0, "world_size": 2, "nodes": ["a", "b"]},
                {"group": 1, "t": 10.0, "world_size": 2, "nodes": ["a", "c"]},
                {"group": 2, "t": 20.0, "world_size": 1, "nodes": ["a"]}],
        attempts=[{"attempt": 0, "t": 1.0, "world_size": 2, "resumed_steps": 0},
                  {"attempt": 1, "t": 11.0, "world_size": 2, "resumed_steps": 4},
                  {"attempt": 2, "t": 21.0, "world_size": 1, "resumed_steps": 4}],
        steps=steps(0, 0, 3, 2.0) + steps(2, 4, 9, 22.0, world_size=1),
        notices=[{"attempt": 1, "rank": 1, "source": "imds", "t": 11.5, "deadline": 15.5},
                 {"attempt": 1, "rank": 0, "agreed": True, "source": "imds", "step": None,
                  "before_first_step": True, "t": 11.6}],
        holds=[{"attempt": 1, "rank": 0, "step": 3, "reason": "notice", "t": 11.6}],
    )
    summary = summarize(ledger, started=0.0, ended=30.0)
    [notice] = summary["notice_details"]
    assert notice["during_startup"] and notice["honoured"]
    assert "no step computed" in notice["why"]
    assert summary["lost_steps"] == 0 and summary["notices_during_startup"] == 1
    assert [r["cause"] for r in summary["restarts"]] == ["failure", "preemption"]


def test_an_unchanged_script_counts_reports_and_loses_what_its_checkpoint_missed() -> None:
    """A script that marks no steps: each report is a step; the restart resumed from the
    checkpoint of report 3 after report 4 was made: report 4 is computed again."""
    ledger = record(
        attempts=[{"attempt": 0, "t": 1.0, "world_size": 2, "resumed_steps": 0},
                  {"attempt": 1, "t": 30.0, "world_size": 2, "resumed_steps": 3,
                   "resumed_from": "ck/3"}],
        steps=steps(0, 0, 3, 5.0, kind="report") + steps(1, 3, 5, 35.0, kind="report"),
        notices=[{"attempt": 0, "rank": 1, "source": "imds", "t": 6.6, "deadline": 12.0},
                 {"attempt": 0, "rank": 0, "agreed": True, "source": "ray-drain", "t": 7.0,
                  "step": None}],
        reports=[{"attempt": 0, "rank": 0, "index": i + 1, "steps_covered": i + 1,
                  "checkpoint": f"ck/{i + 1}", "reason": "script", "t": 5.0 + 0.5 * i}
                 for i in range(4)],
        commits=[{"t": 5.2 + 0.5 * i, "attempt": 0, "index": i + 1, "checkpoint": f"ck/{i + 1}",
                  "metrics": {"accuracy": 0.5 + 0.1 * i, "epoch": i}} for i in range(3)],
    )
    summary = summarize(ledger, started=0.0, ended=40.0)
    assert summary["step_unit"] == "report" and summary["lost_steps"] == 1
    assert summary["final_metrics"] == {"accuracy": pytest.approx(0.7), "epoch": 2}
    [notice] = summary["notice_details"]
    assert not notice["honoured"] and "never committed" in notice["why"]


def test_the_schedule_fires_each_point_on_a_new_group() -> None:
    with pytest.raises(ScheduleError, match="'soon'"):
        parse_schedule("5s,soon")
    schedule = Schedule(parse_schedule("100,start,5s"))
    group0 = GroupView(0, ["od", "s1", "s2"], first_step_t=10.0, steps_done=99)
    assert not schedule.due(group0, 99, now=20.0)
    assert not schedule.due(GroupView(1, ["od"], None), 120, now=21.0)  # not this group's
    group0 = GroupView(0, ["od", "s1", "s2"], first_step_t=10.0, steps_done=100)
    assert schedule.due(group0, 100, now=21.0)
    node = spot_node_to_interrupt(group0, {"s1", "s2"}, [])
    assert node == "s2"  # rank 0's node last
    schedule.fire(group0, "s2", 100, now=21.0)
    assert not schedule.due(group0, 200, now=30.0)  # the interrupted group still runs
    group1 = GroupView(1, ["od", "s1"], first_step_t=None)
    assert schedule.due(group1, 100, now=40.0)  # start: as soon as the next group is placed
    schedule.fire(group1, "s1", 100, now=40.0)
    group2 = GroupView(2, ["od", "s3"], first_step_t=50.0, last_step_t=54.0)
    assert not schedule.due(group2, 110, now=60.0)  # trained 4 s (then it stopped)
    group2 = GroupView(2, ["od", "s3"], first_step_t=50.0, last_step_t=55.0, holding=True)
    assert not schedule.due(group2, 110, now=60.0)  # it holds: a restart is coming
    group2 = GroupView(2, ["od", "s3"], first_step_t=50.0, last_step_t=55.0)
    assert schedule.due(group2, 110, now=55.0)  # 5 s of training in the new group
    assert spot_node_to_interrupt(group2, {"s3"}, ["s1", "s2"]) == "s3"
    assert spot_node_to_interrupt(GroupView(3, ["od"], None), {"s3"}, []) is None
    schedule.fire(group2, "s3", 110, now=55.0)
    assert schedule.pending is None and not schedule.due(GroupView(9, ["s9"], 0.0), 999, 99.0)


def test_a_preemption_request_line_reads_back() -> None:
    line = preempt_line(2, 3, "start", "ab12" * 14, "worker group 4", steps_done=120)
    request = preempt_request(f"(raylet) {line}")
    assert request is not None
    assert (request.index, request.of, request.point, request.node_id) == (
        2, 3, "start", "ab12" * 14)
    assert preempt_request("elastic: step 120/400 on 3 workers") is None


def test_a_point_names_what_runs_on_the_node_it_interrupts() -> None:
    # survivor mode: the view counts joins and leaves; the line names the replica group
    schedule = Schedule(parse_schedule("5"))
    rows: list[dict[str, Any]] = []
    lines: list[str] = []
    view = GroupView(7, ["aa00", "aa03"], first_step_t=0.0, last_step_t=1.0, steps_done=6)
    fire_if_due(schedule, view, 6, {"aa00", "aa03"}, 1.0, rows.append, lines.append,
                holder=lambda node: ("replica group", {"aa00": 0, "aa03": 3}[node]))
    assert [row["group"] for row in rows] == [3] and rows[0]["node_id"] == "aa03"
    assert lines[0].endswith("(replica group 3, 6 steps done)")
    request = preempt_request(lines[0])
    assert request is not None and request.node_id == "aa03"


def test_a_notice_handoff_is_retried_as_a_preemption_and_nothing_else_is() -> None:
    """The ranks end their group with NoticeHandoff once the notice checkpoint is committed:
    Ray Train retries that without charging --max-failures; any other worker error is Ray
    Train's own decision (here: no failure tolerated, so it raises)."""
    import ray.train
    from ray.train.v2._internal.exceptions import UserExceptionWithTraceback
    from ray.train.v2._internal.execution.failure_handling import (
        FailureDecision,
        create_failure_policy,
    )
    from ray.train.v2.api.exceptions import WorkerGroupError

    from workloads.elastic.controller import NoticeAwareFailurePolicy
    from workloads.elastic.worker import NoticeHandoff, handed_off

    config: Any = ray.train.FailureConfig(max_failures=0)
    policy = NoticeAwareFailurePolicy(create_failure_policy(config))
    failures: dict[int, Any] = {0: NoticeHandoff("g1"), 1: NoticeHandoff("g1")}
    handoff = WorkerGroupError("handed off", failures)
    assert handed_off(handoff)
    for _ in range(5):
        assert policy.make_decision(handoff) == FailureDecision.RETRY
    wrapped = UserExceptionWithTraceback(NoticeHandoff("g2"), traceback_str="")
    assert handed_off(WorkerGroupError("wrapped", {0: wrapped}))
    mixed_failures: dict[int, Any] = {0: NoticeHandoff("g1"), 1: ValueError("bug")}
    mixed = WorkerGroupError("mixed", mixed_failures)
    assert not handed_off(mixed)
    assert policy.make_decision(mixed) == FailureDecision.RAISE


def test_ray_train_logs_no_traceback_for_a_handoff_and_a_full_one_for_a_script_error() -> None:
    """A training function run as Ray Train runs it on a worker (its ThreadRunner): ending
    with NoticeHandoff logs nothing once the worker's filter is on (without it, Ray Train
    logs the hand-off's traceback); a real error of the script still logs its traceback."""
    import logging

    from ray.train.v2._internal.execution.worker_group.thread_runner import ThreadRunner

    from tests.helpers.waiting import wait_until
    from workloads.elastic.worker import (
        TRAINING_ERROR_LOGGER,
        HandoffLogFilter,
        NoticeHandoff,
        quiet_handoffs,
    )

    def script_with_a_bug() -> None:
        raise ValueError("a bug in the script")

    def handing_off() -> None:
        raise NoticeHandoff("group 0: step 9 committed after a notice")

    class Kept(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.DEBUG)
            self.records: list[logging.LogRecord] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.records.append(record)

    def logged(target: Any) -> list[str]:
        handler = Kept()
        TRAINING_ERROR_LOGGER.addHandler(handler)
        try:
            runner = ThreadRunner()
            runner.run(target)
            wait_until(lambda: not runner.is_running(), 10, "the training function's end")
            assert runner.get_error() is not None
        finally:
            TRAINING_ERROR_LOGGER.removeHandler(handler)
        return [record.getMessage() for record in handler.records]

    try:
        [unfiltered] = logged(handing_off)
        assert "Traceback" in unfiltered and "NoticeHandoff: group 0" in unfiltered
        quiet_handoffs()
        quiet_handoffs()  # once per process, however many groups start on it
        assert sum(isinstance(f, HandoffLogFilter) for f in TRAINING_ERROR_LOGGER.filters) == 1
        assert logged(handing_off) == []
        [error] = logged(script_with_a_bug)
        assert error.startswith("Error in training function:\nTraceback")
        assert error.rstrip().endswith("ValueError: a bug in the script")
    finally:
        for installed in [f for f in TRAINING_ERROR_LOGGER.filters
                          if isinstance(f, HandoffLogFilter)]:
            TRAINING_ERROR_LOGGER.removeFilter(installed)
