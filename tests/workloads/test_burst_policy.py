"""The data-aware placement policy and the lower bound: pure logic, no Ray."""

from __future__ import annotations

import pytest

from workloads.burst.bound import lower_bound
from workloads.burst.scheduling.policy import (
    INITIAL_SPEED,
    MAX_PENDING,
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
