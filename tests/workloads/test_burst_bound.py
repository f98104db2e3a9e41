"""The perfect-overlap lower bound, checked against values computed without it: by hand, by a
linear program of the same relaxation, and by exhaustive search over whole-task assignments
to every slot (several slots per site, unequal task sizes)."""

from __future__ import annotations

import itertools
import random

import pytest
from scipy.optimize import linprog

from workloads.burst.bound import fetched_bytes_curve, least_bytes, lower_bound

MB = 1_000_000.0


def relaxation_by_lp(
    tasks: list[tuple[float, float]], onprem: int, cloud: int, bandwidth: float | None,
    factor: float = 1.0,
) -> float:
    """min T over fractions f_i of each task run in the cloud:
    Σ(1-f_i)c_i ≤ onprem·T, Σ f_i·factor·c_i ≤ cloud·T, Σ f_i b_i ≤ bandwidth·T."""
    n = len(tasks)
    compute = [c for c, _ in tasks]
    rows = [[-c for c in compute] + [-onprem], [*(factor * c for c in compute), -cloud]]
    limits = [-sum(compute), 0.0]
    if bandwidth:
        rows.append([b for _, b in tasks] + [-bandwidth])
        limits.append(0.0)
    answer = linprog(
        c=[0.0] * n + [1.0], A_ub=rows, b_ub=limits, bounds=[(0, 1)] * n + [(0, None)],
        method="highs",
    )
    assert answer.status == 0, answer.message
    return float(answer.fun)


def best_whole_task_schedule(
    tasks: list[tuple[float, float]], onprem: int, cloud: int, bandwidth: float | None
) -> float:
    """The least over every assignment of whole tasks to slots of max(busiest slot, time to
    send the cloud's bytes): what a real schedule without splitting can at best reach."""
    slots = ["onprem"] * onprem + ["cloud"] * cloud
    best = float("inf")
    for assignment in itertools.product(range(len(slots)), repeat=len(tasks)):
        load = [0.0] * len(slots)
        sent = 0.0
        for (compute, nbytes), slot in zip(tasks, assignment, strict=True):
            load[slot] += compute
            if slots[slot] == "cloud":
                sent += nbytes
        link = sent / bandwidth if bandwidth else 0.0
        best = min(best, max(*load, link))
    return best


def test_by_hand_two_on_prem_slots_one_cloud_slot() -> None:
    tasks = [(1.0, 1 * MB)] * 6
    # x s to the cloud: on-prem (6 - x)/2, cloud x, link x -> x = 2
    assert lower_bound(tasks, 2, 1, 1 * MB) == pytest.approx(2.0)


def test_by_hand_the_light_task_first_then_part_of_the_heavy_one() -> None:
    tasks = [(3.0, 9 * MB), (3.0, 1 * MB)]
    # all of the light task (3 s, 1 MB), then x - 3 s of the heavy one at 3 MB/s:
    # link 1 + 3(x - 3) = on-prem 6 - x -> x = 3.5, both 2.5 s; the two cloud slots 1.75 s
    assert lower_bound(tasks, 1, 2, 1 * MB) == pytest.approx(2.5)


def test_by_hand_sub_second_answers_and_a_free_link() -> None:
    tasks = [(0.3, 0.0)] * 4
    assert lower_bound(tasks, 1, 1, None) == pytest.approx(0.6)
    assert lower_bound(tasks, 1, 3, None) == pytest.approx(0.3)
    assert lower_bound(tasks, 0, 2, None) == pytest.approx(0.6)  # no on-prem slot: all cloud
    assert lower_bound(tasks, 3, 0, None) == pytest.approx(0.4)  # no cloud slot


def test_by_hand_a_task_with_no_compute_goes_last() -> None:
    # the 0 s / 50 MB task is never worth sending; 1 s of the other to the cloud: 1 MB -> 1 s
    tasks = [(0.0, 50 * MB), (2.0, 2 * MB)]
    assert lower_bound(tasks, 1, 1, 1 * MB) == pytest.approx(1.0)


@pytest.mark.parametrize("seed", range(25))
def test_equals_the_linear_program_and_never_beats_a_whole_task_schedule(seed: int) -> None:
    rng = random.Random(seed)
    tasks = [
        (rng.choice([0.0, 0.2, 0.5, 1.0, 2.0, 5.0]) * rng.uniform(0.5, 1.5),
         rng.choice([0.1, 1.0, 4.0, 20.0]) * MB * rng.uniform(0.5, 1.5))
        for _ in range(rng.randint(1, 5))
    ]
    if sum(c for c, _ in tasks) == 0:
        tasks.append((1.0, 1 * MB))
    onprem, cloud = rng.randint(0, 3), rng.randint(1, 3)
    bandwidth = rng.choice([None, 0.5 * MB, 2 * MB, 10 * MB])
    bound = lower_bound(tasks, onprem, cloud, bandwidth)
    assert bound == pytest.approx(relaxation_by_lp(tasks, onprem, cloud, bandwidth), rel=1e-6)
    if len(tasks) <= 4:
        assert bound <= best_whole_task_schedule(tasks, onprem, cloud, bandwidth) * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(10))
def test_a_slower_or_faster_cloud_equals_the_linear_program(seed: int) -> None:
    rng = random.Random(100 + seed)
    tasks = [(rng.uniform(0.5, 3.0), rng.uniform(0.1, 20.0) * MB) for _ in range(rng.randint(2, 6))]
    factor = rng.choice([0.5, 0.8, 1.25, 2.0])
    onprem, cloud = rng.randint(1, 3), rng.randint(1, 3)
    bandwidth = rng.choice([None, 1 * MB, 5 * MB])
    bound = lower_bound(tasks, onprem, cloud, bandwidth, fetching_factor=factor)
    assert bound == pytest.approx(
        relaxation_by_lp(tasks, onprem, cloud, bandwidth, factor), rel=1e-6)


def test_by_hand_a_cloud_twice_as_slow() -> None:
    # six 1 s tasks, one slot each side, free link: x s (on-prem seconds) to the cloud takes
    # 2x there; 6 - x = 2x -> x = 2, 4 s
    assert lower_bound([(1.0, 0.0)] * 6, 1, 1, None, fetching_factor=2.0) == pytest.approx(4.0)


def test_the_bytes_curve_by_hand_interpolated_and_capped_at_every_task_sent() -> None:
    # by bytes per compute second: 1 MB/s (2 s), then 3 MB/s (1 s), the 0 s task last
    points = fetched_bytes_curve([(1.0, 3 * MB), (0.0, 50 * MB), (2.0, 2 * MB)])
    assert points == [(0.0, 0.0), (2.0, 2 * MB), (3.0, 5 * MB), (3.0, 55 * MB)]
    assert least_bytes(points, 1.0) == pytest.approx(1 * MB)
    assert least_bytes(points, 2.5) == pytest.approx(3.5 * MB)
    assert least_bytes(points, 4.0) == 55 * MB  # more compute than there is: everything sent


def test_tasks_with_no_compute_at_all_bound_nothing() -> None:
    # nothing to compute, so nothing need be sent: the zero-length step is not divided by
    assert lower_bound([(0.0, 5 * MB)], 1, 1, 1 * MB) == 0.0
    assert lower_bound([(0.0, 5 * MB), (0.0, 1 * MB)], 2, 3, 1 * MB) == 0.0
