"""Survivor mode's accounting on known ledgers (workloads/elastic/summary.summarize_replicas):
each replacement's notice, leave, rejoin and the steps the other groups committed meanwhile;
a step computed twice only when a group reports it again (it did not commit) or a new
generation of groups (every group lost, resumed from a checkpoint) reaches it again."""

from __future__ import annotations

from typing import Any

from workloads.elastic.replicas import _report_step, progress_line
from workloads.elastic.summary import summarize_replicas


def reports(group: int, slot: int, first: int, last: int, t0: float) -> list[dict[str, Any]]:
    return [{"replica_group": group, "slot": slot, "attempt": group, "rank": 0, "step": step,
             "t": t0 + (step - first) * 0.5, "kind": "report", "loss": 1.0 / (step + 1)}
            for step in range(first, last + 1)]


def join(group: int, slot: int, t: float, seen: float, generation: int = 0,
         resumed_from: str | None = None) -> dict[str, Any]:
    return {"event": "join", "replica_group": group, "slot": slot, "node_id": f"n{group}",
            "t": t, "node_seen": seen, "generation": generation, "resumed_from": resumed_from}


def leave(group: int, slot: int, t: float, cause: str = "left") -> dict[str, Any]:
    return {"event": "leave", "replica_group": group, "slot": slot, "node_id": f"n{group}",
            "t": t, "cause": cause}


def ledger(**rows: Any) -> dict[str, Any]:
    base: dict[str, Any] = {name: [] for name in ("steps", "reports", "commits", "notices",
                                                 "resizes", "schedule")}
    return {**base, "final": {}, "total_steps": None, **rows}


def test_a_replacement_is_timed_and_the_survivors_steps_counted() -> None:
    # groups 0 and 1 train steps 0..19 (t 0..9.5); group 1 is noticed at 4.1, leaves at 4.6
    # after step 9; group 2 joins its slot at 7.0 on a node seen at 6.0 and steps from 17
    summary = summarize_replicas(ledger(
        steps=reports(0, 0, 0, 19, 0.0) + reports(1, 1, 0, 9, 0.0) + reports(2, 1, 17, 19, 8.5),
        notices=[{"replica_group": 1, "slot": 1, "t": 4.1, "source": "ray-drain"}],
        resizes=[join(0, 0, -1.0, -2.0), join(1, 1, -1.0, -2.0), leave(1, 1, 4.6),
                 join(2, 1, 7.0, 6.0)]), started=0.0, ended=10.0)
    assert summary["mode"] == "torchft" and summary["completed"]
    assert summary["steps_done"] == 20 and summary["lost_steps"] == 0
    assert summary["preemptions"] == 1 and summary["notices_honoured"] == 1
    [replaced] = summary["replacements"]
    assert replaced == {"replica_group": 1, "slot": 1, "node_id": "n1", "cause": "left",
                        "notice_t": 4.1, "leave_t": 4.6, "replacement_group": 2,
                        "node_joined_t": 6.0, "join_t": 7.0, "rejoin_t": 8.5,
                        # group 0's steps after 4.1 up to 8.5: steps 9..17
                        "survivor_steps": 9}
    assert [w["workers"] for w in summary["worker_counts"]] == [1, 2, 1, 2]
    assert summary["final_metrics"] == {"loss": 1.0 / 20}


def test_no_node_back_leaves_the_rejoin_empty_and_counts_survivors_to_the_end() -> None:
    summary = summarize_replicas(ledger(
        steps=reports(0, 0, 0, 19, 0.0) + reports(1, 1, 0, 9, 0.0),
        resizes=[join(0, 0, -1.0, -2.0), join(1, 1, -1.0, -2.0), leave(1, 1, 4.6, "lost")]),
        started=0.0, ended=10.0)
    [replaced] = summary["replacements"]
    assert replaced["rejoin_t"] is None and replaced["join_t"] is None
    assert replaced["notice_t"] == 4.6  # no notice: the loss is when it was seen
    assert replaced["survivor_steps"] == 10  # steps 10..19
    assert summary["notices_honoured"] == 0


def test_a_step_reported_twice_or_redone_after_a_resume_is_lost() -> None:
    again = reports(0, 0, 5, 5, 3.0)  # group 0 reports step 5 again: it did not commit
    resumed = reports(2, 0, 8, 12, 20.0)  # every group lost after step 11; resumed at 8
    summary = summarize_replicas(ledger(
        steps=reports(0, 0, 0, 11, 0.0) + reports(1, 1, 0, 11, 0.0) + again + resumed,
        resizes=[join(0, 0, -1.0, -2.0), join(1, 1, -1.0, -2.0), leave(0, 0, 6.0, "lost"),
                 leave(1, 1, 6.0, "lost"),
                 join(2, 0, 15.0, 14.0, generation=1, resumed_from="ck/8")]),
        started=0.0, ended=30.0)
    assert summary["steps_done"] == 13
    assert summary["lost_steps"] == 1 + 4  # step 5 twice; steps 8..11 again
    assert summary["resumed_from_checkpoint"] == 1 and summary["preemptions"] == 2


def test_steps_whose_rows_died_with_their_group_still_count_as_done() -> None:
    # group 0 alone commits steps 0..7 but is killed before its rows of 1..7 reach the
    # ledger; group 1 reports 8..9: torchft commits in order, so ten steps were done
    summary = summarize_replicas(ledger(
        steps=reports(0, 0, 0, 0, 0.0) + reports(1, 1, 8, 9, 1.0),
        resizes=[join(0, 0, -1.0, -2.0), join(1, 1, 0.5, 0.4), leave(0, 0, 2.0, "lost")]),
        started=0.0, ended=3.0)
    assert summary["steps_done"] == 10 and summary["step_executions"] == 10
    assert summary["lost_steps"] == 0


def test_a_generation_computed_every_step_from_its_first_to_its_newest() -> None:
    # generation 0: the rows of steps 2..7 died with their group; both groups are lost after
    # step 12 and generation 1 resumes from the checkpoint of step 10
    summary = summarize_replicas(ledger(
        steps=reports(0, 0, 0, 1, 0.0) + reports(1, 1, 0, 1, 0.0) + reports(1, 1, 8, 12, 4.0)
        + reports(2, 0, 11, 19, 20.0),
        resizes=[join(0, 0, -1.0, -2.0), join(1, 1, -1.0, -2.0), leave(0, 0, 7.0, "lost"),
                 leave(1, 1, 7.0, "lost"),
                 join(2, 0, 15.0, 14.0, generation=1, resumed_from="ck/10")]),
        started=0.0, ended=30.0)
    assert summary["steps_done"] == 20
    assert summary["step_executions"] == 13 + 9 and summary["lost_steps"] == 2  # 11, 12 again


def test_a_reports_step_is_torchfts_committed_steps_less_one() -> None:
    assert _report_step({"step": 7}, reports=3) == 6
    assert _report_step({"loss": 0.1}, reports=3) == 3  # no step: the group's reports
    assert _report_step({"step": True}, reports=0) == 0


def test_a_group_lost_before_its_first_step_lost_nothing_of_its_own() -> None:
    summary = summarize_replicas(ledger(
        steps=reports(0, 0, 0, 19, 0.0),
        resizes=[join(0, 0, -1.0, -2.0), join(1, 1, 2.0, 1.5), leave(1, 1, 4.0, "lost")]),
        started=0.0, ended=10.0)
    assert summary["notices_honoured"] == 1 and summary["notices_during_startup"] == 1


def test_the_progress_line_counts_groups_that_train_apart_from_those_starting() -> None:
    progress = {"steps_done": 265, "stepped": [0, 1, 2, 3], "leaves": 1, "loss": 0.25}
    assert progress_line(progress, [0, 2, 3, 4]) == (
        "elastic: step 265 on 3 replica groups, 1 starting, 1 left or lost so far, loss 0.2500")
    assert progress_line({**progress, "leaves": 0, "loss": None}, [0, 1]) == (
        "elastic: step 265 on 2 replica groups")
