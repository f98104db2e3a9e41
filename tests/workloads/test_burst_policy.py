"""The data-aware placement policy and the lower bound: pure logic, no Ray."""

from __future__ import annotations

import pytest

from workloads.burst.bound import lower_bound
from workloads.burst.scheduling.policy import (
    INITIAL_SPEED,
    MAX_PENDING,
    STAGE_AHEAD_BYTES,
    DataAwarePolicy,
    DecayedRate,
    Job,
)

MB = 1_000_000.0


def two_nodes(cloud_needs_transfer: bool = True) -> DataAwarePolicy:
    policy = DataAwarePolicy()
    policy.add_node("hpc", slots=1, needs_transfer=False)
    policy.add_node("cloud", slots=1, needs_transfer=cloud_needs_transfer)
    return policy


def test_speed_starts_at_1000_and_learns_with_decay_0_2() -> None:
    rate = DecayedRate(INITIAL_SPEED)
    assert rate.value == 1000.0
    rate.observe(2000.0, 1.0)  # totals 2000 / 1
    assert rate.value == pytest.approx(2000.0)
    rate.observe(1000.0, 4.0)  # totals 0.2*2000+1000=1400 / 0.2*1+4=4.2
    assert rate.value == pytest.approx(1400.0 / 4.2)


def test_finished_tasks_teach_the_node_its_speed() -> None:
    policy = two_nodes()
    job = Job("a", 4 * MB)
    policy.assign(job, "hpc")
    policy.started("hpc", job, now=0.0)
    policy.finished("hpc", job, compute_ms=2000.0)
    assert policy.speed("hpc") == pytest.approx(2000.0)  # bytes per ms
    assert policy.speed("cloud") == INITIAL_SPEED


def test_earliest_finish_prefers_the_faster_node() -> None:
    policy = two_nodes(cloud_needs_transfer=False)
    for node, ms in (("hpc", 4000.0), ("cloud", 1000.0)):
        job = Job(f"warm-{node}", 1 * MB)
        policy.assign(job, node)
        policy.started(node, job, 0.0)
        policy.finished(node, job, ms)
    assert policy.choose(Job("x", 1 * MB), now=10.0) == "cloud"


def test_a_busy_fast_node_loses_to_an_idle_slower_one() -> None:
    policy = two_nodes(cloud_needs_transfer=False)
    for node, ms in (("hpc", 2000.0), ("cloud", 1000.0)):
        job = Job(f"warm-{node}", 1 * MB)
        policy.assign(job, node)
        policy.started(node, job, 0.0)
        policy.finished(node, job, ms)
    for index in range(3):  # three seconds of queued work on the cloud
        policy.assign(Job(f"q{index}", 1 * MB), "cloud")
    assert policy.choose(Job("x", 1 * MB), now=10.0) == "hpc"


def test_slow_learned_transfers_push_work_on_prem() -> None:
    policy = two_nodes()
    job = Job("t", 10 * MB)
    policy.assign(job, "cloud")
    assert policy.next_transfer("cloud", now=0.0) == job
    policy.transfer_done("cloud", job, seconds=10.0)  # 1 MB/s
    policy.started("cloud", job, now=10.0)
    policy.finished("cloud", job, compute_ms=100.0)
    # equal compute speed is unknown on-prem (initial 1000 B/ms = 1 MB/s): 10 s there,
    # but 10 s of transfer plus 0.1 s compute on the cloud
    assert policy.choose(Job("next", 10 * MB), now=20.0) == "hpc"


def test_no_node_takes_more_than_five_pending_tasks() -> None:
    policy = two_nodes()
    placed = []
    for index in range(3 * MAX_PENDING):
        node = policy.choose(Job(f"j{index}", MB), now=0.0)
        if node is None:
            break
        policy.assign(Job(f"j{index}", MB), node)
        placed.append(node)
    assert len(placed) == 2 * MAX_PENDING
    assert placed.count("hpc") == placed.count("cloud") == MAX_PENDING
    assert policy.choose(Job("one-more", MB), now=0.0) is None


def test_one_transfer_at_a_time_and_compute_only_after_its_data() -> None:
    policy = two_nodes()
    first, second = Job("a", MB), Job("b", MB)
    policy.assign(first, "cloud")
    policy.assign(second, "cloud")
    assert policy.next_compute("cloud") is None  # nothing staged yet
    assert policy.next_transfer("cloud", 0.0) == first
    assert policy.next_transfer("cloud", 0.1) is None  # the slot is busy
    policy.transfer_done("cloud", first, 0.5)
    assert policy.next_compute("cloud") == first
    policy.started("cloud", first, 0.5)
    assert policy.next_transfer("cloud", 0.5) == second  # streams while the first computes
    policy.transfer_done("cloud", second, 0.5)
    assert policy.next_compute("cloud") is None  # the one slot is taken
    policy.finished("cloud", first, 800.0)
    assert policy.next_compute("cloud") == second


def test_on_prem_data_needs_no_transfer() -> None:
    policy = two_nodes()
    job = Job("a", MB)
    policy.assign(job, "hpc")
    assert policy.next_transfer("hpc", 0.0) is None
    assert policy.next_compute("hpc") == job


def test_a_removed_node_returns_its_running_and_pending_tasks() -> None:
    policy = two_nodes()
    jobs = [Job(f"j{i}", MB) for i in range(3)]
    for job in jobs:
        policy.assign(job, "cloud")
    policy.next_transfer("cloud", 0.0)
    policy.transfer_done("cloud", jobs[0], 1.0)
    policy.started("cloud", jobs[0], 1.0)
    assert policy.remove_node("cloud") == jobs
    assert policy.choose(Job("x", MB), 2.0) == "hpc"


def test_lower_bound_balances_compute_and_link() -> None:
    tasks = [(1.0, 4 * MB)] * 10  # 10 s of compute, 40 MB
    assert lower_bound(tasks, 1, 1, None) == pytest.approx(5.0)  # compute split evenly
    assert lower_bound(tasks, 1, 0, 1 * MB) == pytest.approx(10.0)  # no cloud
    # 1 MB/s link: x s of cloud compute costs 4x s of transfer: 10 - x = 4x -> x = 2
    assert lower_bound(tasks, 1, 1, 1 * MB) == pytest.approx(8.0)


def test_lower_bound_sends_compute_heavy_tasks_to_the_cloud_first() -> None:
    tasks = [(4.0, 1 * MB), (4.0, 100 * MB)]
    # the light task (4 s, 1 MB) goes to the cloud: max(4, 4, 1) = 4
    assert lower_bound(tasks, 1, 1, 1 * MB) == pytest.approx(4.0)


def warmed_cloud() -> DataAwarePolicy:
    """A two-slot cloud node that learned 2000 B/ms compute and 2 MB/s transfers."""
    policy = DataAwarePolicy()
    policy.add_node("cloud", slots=2, needs_transfer=True)
    warm = Job("warm", 1 * MB)
    policy.assign(warm, "cloud")
    policy.next_transfer("cloud", now=0.0)
    policy.transfer_done("cloud", warm, seconds=0.5)  # 1 MB in 0.5 s
    policy.started("cloud", warm, now=0.5)
    policy.finished("cloud", warm, compute_ms=500.0)  # 1 MB in 500 ms
    return policy


def test_estimated_finish_by_hand_with_a_running_job_a_transfer_in_flight_and_a_queue() -> None:
    policy = warmed_cloud()
    node = policy.nodes["cloud"]
    assert node.transfer_rate.value == pytest.approx(2 * MB)
    assert policy.speed("cloud") == pytest.approx(2000.0)
    running = Job("r", 4 * MB)
    policy.assign(running, "cloud")
    policy.next_transfer("cloud", now=8.0)
    policy.transfer_done("cloud", running, seconds=2.0)  # 2 MB/s again
    policy.started("cloud", running, now=10.0)  # computes 2 s: until 12
    first, second = Job("p1", 2 * MB), Job("p2", 2 * MB)
    policy.assign(first, "cloud")
    policy.assign(second, "cloud")
    assert policy.next_transfer("cloud", now=10.5) == first  # 1 s: data there at 11.5
    # slots free at 11 (idle) and 12; p1 ready 11.5 -> 11.5..12.5 on the idle slot;
    # p2's data 11.5..12.5 -> 12.5..13.5 on the other slot; x's data 12.5..13.5 -> 13.5..14.5
    assert node.estimated_finish(Job("x", 2 * MB), now=11.0) == pytest.approx(14.5)
    # a 1 MB x: data 12.5..13.0, the slot free from 12.5 -> 13.0..13.5
    assert node.estimated_finish(Job("x", 1 * MB), now=11.0) == pytest.approx(13.5)


def test_estimated_finish_by_hand_behind_a_job_still_computing() -> None:
    policy = DataAwarePolicy()
    policy.add_node("hpc", slots=1, needs_transfer=False)
    running = Job("r", 3 * MB)  # 3 s at the initial 1000 B/ms, from 0: the slot is free at 3
    policy.assign(running, "hpc")
    policy.started("hpc", running, now=0.0)
    assert policy.nodes["hpc"].estimated_finish(Job("x", 1 * MB), now=1.0) == pytest.approx(4.0)


def test_estimated_finish_by_hand_on_prem_behind_an_overrunning_job() -> None:
    policy = DataAwarePolicy()
    policy.add_node("hpc", slots=1, needs_transfer=False)
    late = Job("late", 1 * MB)  # 1 s at the initial 1000 B/ms, started at 0: overdue at 5
    policy.assign(late, "hpc")
    policy.started("hpc", late, now=0.0)
    policy.assign(Job("q", 1 * MB), "hpc")  # staged at once: 5..6
    assert policy.nodes["hpc"].estimated_finish(Job("x", 2 * MB), now=5.0) == pytest.approx(8.0)


def test_a_node_without_slots_is_never_chosen() -> None:
    policy = DataAwarePolicy()
    policy.add_node("empty", slots=0, needs_transfer=False)
    policy.add_node("hpc", slots=1, needs_transfer=False)
    assert policy.choose(Job("x", MB), now=0.0) == "hpc"


def test_instant_transfers_and_computes_do_not_break_the_rates() -> None:
    policy = warmed_cloud()
    job = Job("instant", 1 * MB)
    policy.assign(job, "cloud")
    policy.next_transfer("cloud", now=1.0)
    policy.transfer_done("cloud", job, seconds=0.0)  # no time measured: nothing learned
    assert policy.nodes["cloud"].transfer_rate.value == pytest.approx(2 * MB)
    policy.started("cloud", job, now=1.0)
    assert policy.nodes["cloud"].staged == set()
    policy.finished("cloud", job, compute_ms=0.0)  # counted as 1 µs
    assert policy.speed("cloud") == pytest.approx((0.2 * MB + MB) / (0.2 * 500.0 + 1e-3))


def test_unknown_jobs_and_nodes_are_ignored() -> None:
    policy = two_nodes()
    policy.finished("hpc", Job("never-started", MB), compute_ms=1000.0)
    assert policy.remove_node("nosuch") == []


def warmed_pair() -> DataAwarePolicy:
    """One-slot hpc (data local) and cloud nodes, both computing 1000 B/ms (1 MB/s); the cloud
    learned 1 MB/s transfers."""
    policy = two_nodes()
    for node_id in ("hpc", "cloud"):
        warm = Job(f"warm-{node_id}", 1 * MB)
        policy.assign(warm, node_id)
        if node_id == "cloud":
            policy.next_transfer("cloud", now=0.0)
            policy.transfer_done("cloud", warm, seconds=1.0)
        policy.started(node_id, warm, now=0.0)
        policy.finished(node_id, warm, compute_ms=1000.0)
    return policy


def test_an_idle_hpc_node_takes_the_last_job_queued_behind_slow_transfers() -> None:
    policy = warmed_pair()
    queued = [Job(f"q{i}", 2 * MB) for i in range(3)]
    for job in queued:
        policy.assign(job, "cloud")
    assert policy.next_transfer("cloud", now=0.0) is queued[0]  # q0's data is moving
    # cloud: q0 ready at 2 s, done 4; q1 ready 4, done 6; q2 ready 6, done 8.
    # hpc (idle, data local) would finish any of them at 2: q2 gains most (6 s)
    assert policy.take_over("hpc", now=0.0) == (queued[2], "cloud")
    assert policy.nodes["hpc"].pending == [queued[2]]
    assert "q2" in policy.nodes["hpc"].staged
    assert policy.nodes["cloud"].pending == queued[:2]
    # the hpc node has a job pending now: it takes nothing more until that one started
    assert policy.take_over("hpc", now=0.0) is None


def test_the_job_whose_data_is_moving_may_go_and_its_transfer_then_stages_nothing() -> None:
    policy = warmed_pair()
    last = Job("last", 4 * MB)
    policy.assign(last, "cloud")
    assert policy.next_transfer("cloud", now=0.0) is last
    # cloud: data there at 4 s, done at 8; hpc: done at 4
    assert policy.take_over("hpc", now=0.0) == (last, "cloud")
    cloud = policy.nodes["cloud"]
    assert cloud.pending == [] and cloud.moving is last
    # the link stays busy until that transfer ends: a new job for the cloud waits for it
    assert cloud.estimated_finish(Job("next", 1 * MB), now=0.0) == pytest.approx(4 + 1 + 1)
    assert policy.next_transfer("cloud", now=1.0) is None
    assert policy.transfer_done("cloud", last, seconds=4.0) is False
    assert "last" not in cloud.staged and cloud.moving is None
    assert policy.next_compute("cloud") is None
    assert policy.next_compute("hpc") is last


def test_a_staged_job_stays_where_its_data_is_unless_moving_it_finishes_it_sooner() -> None:
    policy = warmed_pair()
    staged = Job("staged", 2 * MB)
    policy.assign(staged, "cloud")
    policy.next_transfer("cloud", now=0.0)
    assert policy.transfer_done("cloud", staged, seconds=2.0) is True
    # the cloud computes it now, done at 2; hpc would be done at 2 as well: no gain
    assert policy.take_over("hpc", now=0.0) is None


def test_a_free_cloud_slot_takes_an_hpc_job_only_when_it_finishes_it_sooner() -> None:
    policy = warmed_pair()
    jobs = [Job(f"h{i}", 1 * MB) for i in range(3)]
    for job in jobs:
        policy.assign(job, "hpc")
    # hpc: h0 done at 1, h1 at 2, h2 at 3; cloud: 1 s transfer + 1 s compute = 2: h2 gains 1 s
    assert policy.take_over("cloud", now=0.0) == (jobs[2], "hpc")
    # its data must move first
    assert policy.nodes["cloud"].next_to_move(STAGE_AHEAD_BYTES) is jobs[2]
    alone = warmed_pair()
    alone.assign(Job("only", 1 * MB), "hpc")  # done at 1 on hpc, at 2 in the cloud: stays
    assert alone.take_over("cloud", now=0.0) is None


def test_a_busy_node_takes_nothing_over() -> None:
    policy = warmed_pair()
    running = Job("r", 1 * MB)
    policy.assign(running, "hpc")
    policy.started("hpc", running, now=0.0)
    for i in range(3):
        policy.assign(Job(f"c{i}", 2 * MB), "cloud")
    assert policy.take_over("hpc", now=0.0) is None


def test_a_node_stages_ahead_only_within_its_budget_and_always_its_next_input() -> None:
    policy = DataAwarePolicy(stage_ahead_bytes=5 * MB)
    policy.add_node("onprem", slots=1, needs_transfer=True)  # s3: every node fetches
    jobs = [Job("big", 8 * MB), Job("a", 2 * MB), Job("b", 2 * MB), Job("c", 2 * MB)]
    for job in jobs:
        policy.assign(job, "onprem")
    assert policy.next_transfer("onprem", now=0.0) is jobs[0]  # over the budget, held nothing
    assert policy.next_transfer("onprem", now=0.1) is None  # one transfer at a time
    policy.transfer_done("onprem", jobs[0], seconds=1.0)
    assert policy.next_transfer("onprem", now=1.0) is None  # 8 MB held: nothing more
    assert policy.next_compute("onprem") is jobs[0]
    policy.started("onprem", jobs[0], now=1.0)  # computing: no longer held ahead
    assert policy.next_transfer("onprem", now=1.0) is jobs[1]
    policy.transfer_done("onprem", jobs[1], seconds=0.2)
    assert policy.next_transfer("onprem", now=1.2) is jobs[2]  # 2 + 2 MB within 5
    policy.transfer_done("onprem", jobs[2], seconds=0.2)
    assert policy.next_transfer("onprem", now=1.4) is None  # 4 + 2 MB would exceed it
