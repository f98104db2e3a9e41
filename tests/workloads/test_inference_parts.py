"""The inference cluster's pure parts: fair shares and the stride pick, latency statistics
with true percentiles, the query-rate window, and model files read without unpickling."""

from __future__ import annotations

import io

import numpy as np
import pytest

from workloads.inference.models import (
    Mlp,
    ModelFileError,
    array_from_bytes,
    array_shape,
    array_to_bytes,
)
from workloads.inference.scheduler import Scheduler, fair_shares
from workloads.inference.stats import latency_stats, spread, window_cost, window_rate


def test_shares_follow_cost_per_query_and_unmeasured_jobs_get_the_mean() -> None:
    assert fair_shares({"a": 1.0, "b": 3.0}) == {"a": 0.25, "b": 0.75}
    shares = fair_shares({"a": 1.0, "b": 3.0, "new": None})
    assert shares["new"] == pytest.approx(2.0 / 6.0)
    assert fair_shares({"a": None, "b": None}) == {"a": 0.5, "b": 0.5}


def simulate(policy: str, costs: dict[str, float], workers: int, seconds: float,
             batch: int = 10, busy: dict[str, float] | None = None) -> dict[str, float]:
    """Discrete-event run of the scheduler: each free worker takes a sub-job of `batch`
    queries of the picked job; returns each job's query rate (and fills `busy` with each
    job's worker-seconds)."""
    busy = {} if busy is None else busy
    scheduler = Scheduler(policy)
    for name in costs:
        scheduler.admit(name)
    scheduler.rebalance(costs)
    free_at = [0.0] * workers
    answered = dict.fromkeys(costs, 0)
    while True:
        worker = min(range(workers), key=lambda w: free_at[w])
        now = free_at[worker]
        if now >= seconds:
            break
        job = scheduler.pick(list(costs))
        assert job is not None
        scheduler.charge(job, batch)
        free_at[worker] = now + batch * costs[job]
        busy[job] = busy.get(job, 0.0) + batch * costs[job]
        answered[job] += batch
    return {job: count / seconds for job, count in answered.items()}


def test_stride_pick_gives_each_job_its_share_of_worker_time_and_equal_query_rates() -> None:
    busy: dict[str, float] = {}
    rates = simulate("fair", {"small": 0.001, "large": 0.004}, workers=4, seconds=60.0,
                     busy=busy)
    assert spread(list(rates.values())) == pytest.approx(1.0, abs=0.01)
    assert busy["large"] / busy["small"] == pytest.approx(4.0, rel=0.02)  # shares 0.8 / 0.2
    three = simulate("fair", {"a": 0.001, "b": 0.002, "c": 0.0045}, workers=3, seconds=60.0)
    assert spread(list(three.values())) == pytest.approx(1.0, abs=0.01)


def test_first_come_first_served_starves_the_later_job() -> None:
    rates = simulate("fcfs", {"small": 0.001, "large": 0.004}, workers=4, seconds=10.0)
    assert rates["large"] == 0.0 and rates["small"] > 0


def test_a_job_admitted_later_gets_no_credit_for_the_time_it_waited() -> None:
    scheduler = Scheduler("fair")
    scheduler.admit("a")
    scheduler.rebalance({"a": 1.0})
    scheduler.charge("a", 100)
    scheduler.admit("b")
    assert scheduler.passes["b"] == scheduler.passes["a"]
    with pytest.raises(ValueError, match="--policy"):
        Scheduler("random")


def test_a_first_measurement_does_not_stall_the_job_that_led_at_the_placeholder_price() -> None:
    scheduler = Scheduler("fair")
    for job in ("small", "large"):
        scheduler.admit(job)
    for _ in range(101):  # before any measurement: one job ends a sub-job ahead
        scheduler.charge(scheduler.pick(["small", "large"]) or "", 20)
    scheduler.rebalance({"small": 0.0005, "large": 0.0008})  # seconds become milliseconds
    picks = []
    for _ in range(20):
        picks.append(scheduler.pick(["small", "large"]) or "")
        scheduler.charge(picks[-1], 20)
    assert abs(picks.count("small") - picks.count("large")) <= 2, picks


def test_percentiles_are_true_percentiles_not_the_originals_descending_p10() -> None:
    latencies = [i / 1000.0 for i in range(1, 101)]  # 1 … 100 ms
    stats = latency_stats(latencies)
    assert stats["p90_ms"] == pytest.approx(90.1)
    assert stats["p99_ms"] == pytest.approx(99.01)
    assert stats["median_ms"] == pytest.approx(50.5)
    assert stats["mean_ms"] == pytest.approx(50.5)
    assert latency_stats([])["p95_ms"] is None


def test_rate_window_counts_only_recent_completions_and_a_young_job_by_its_age() -> None:
    events = [(10.0, 100), (25.0, 50), (39.0, 30)]
    assert window_rate(events, now=40.0, window_s=30.0, started_at=0.0) == pytest.approx(
        80 / 30)
    assert window_rate(events, now=40.0, window_s=30.0, started_at=30.0) == pytest.approx(3.0)
    assert window_cost([(1.0, 10, 0.5), (20.0, 10, 0.1)], now=25.0, window_s=10.0) == \
        pytest.approx(0.01)
    assert window_cost([], now=1.0, window_s=10.0) is None


def test_model_round_trips_and_a_pickled_file_is_refused() -> None:
    weights = (np.eye(3, dtype=np.float32), np.ones((3, 2), np.float32))
    biases = (np.zeros(3, np.float32), np.array([0.0, 1.0], np.float32))
    model = Mlp.from_bytes(Mlp(weights, biases).to_bytes())
    assert model.predict_one(np.array([1.0, 0.0, 0.0], np.float32)) == 1
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ModelFileError, match="labels: not a .npy array"):
        array_from_bytes(buffer.getvalue(), "labels")
    with pytest.raises(ModelFileError, match="labels: not a .npy array"):
        array_shape(buffer.getvalue(), "labels")  # job-add reads the header alone
    assert array_shape(array_to_bytes(np.zeros((7, 64), np.float32)), "t") == (7, 64)
    with pytest.raises(ModelFileError, match="m: not a model file"):
        Mlp.from_bytes(array_to_bytes(np.zeros(3)), "m")
