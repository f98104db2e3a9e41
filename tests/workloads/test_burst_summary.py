"""summary.json, the printed table and makespan.png: one lower bound for both schedulers, from
the calibrated compute time per task, so a run whose tasks compute slower is measured against
the same bound as the run beside it (its own-compute bound is a labelled diagnostic)."""

from __future__ import annotations

from typing import Any

import numpy
import pytest

from workloads.burst.calibration import Calibration
from workloads.burst.cluster import NodeInfo
from workloads.burst.figures import makespan_plot
from workloads.burst.inputs import TaskSpec
from workloads.burst.options import BurstOptions
from workloads.burst.scheduling.base import RunResult
from workloads.burst.summary import common_bound, format_table, summarize

MB = 1_000_000
WORKERS = [NodeInfo("hpc-id", "onprem", "hpc", 2, "198.18.0.2"),
           NodeInfo("cloud-id", "cloud", "cloud", 2, "198.18.1.1")]
TASKS = [TaskSpec(f"t{i}", i, (f"f{i}",), 10 * MB) for i in range(4)]
CONFIG = BurstOptions(lab="netns", bandwidth_mbit=80.0, profile="80m")  # 10 MB/s
CALIBRATION = Calibration(("t0",), {"onprem": [2.0, 2.1, 1.9], "cloud": [2.0, 2.2, 1.8]},
                          {"onprem": [1.9] * 3, "cloud": [1.9] * 3})


def run(name: str, makespan: float, compute_s: float, cpu: dict[str, float]) -> RunResult:
    """Two tasks per site, one after the other, each computing `compute_s`."""
    result = RunResult(name, 100.0, finished=100.0 + makespan, scheduler_cpu_s=cpu["own"],
                       site_cpu_s={"onprem": cpu["onprem"], "cloud": cpu["cloud"]})
    for i, task in enumerate(TASKS):
        site = "onprem" if i < 2 else "cloud"
        start = (i % 2) * compute_s
        result.records.append({
            "task": task.name, "site": site, "compute_start": start,
            "compute_end": start + compute_s, "bytes_moved": task.nbytes if site == "cloud" else 0,
            "compute_cpu_s": compute_s * 0.9, "transfer_cpu_s": 0.1 if site == "cloud" else None,
        })
    return result


def summary() -> dict[str, Any]:
    results = {
        "default": run("default", 5.0, 2.0, {"own": 0.3, "onprem": 6.0, "cloud": 5.0}),
        # the data-aware run's tasks computed 1.5x slower: its own-compute bound is 1.5x too
        "data-aware": run("data-aware", 6.0, 3.0, {"own": 2.5, "onprem": 9.0, "cloud": 7.0}),
    }
    return summarize(CONFIG, TASKS, results, {}, WORKERS, 2, CALIBRATION,
                     {"onprem": [0], "cloud": [1]})


def test_both_schedulers_share_the_bound_of_the_calibrated_compute_times() -> None:
    result = summary()
    # 8 s of 2 s tasks, 1 slot a site, 5 MB per compute second: x s in the cloud needs
    # 0.5x s of link; 8 - x = x -> 4 s
    assert result["lower_bound_s"] == pytest.approx(4.0)
    assert result["bound"]["compute_s"] == {"onprem": 2.0, "cloud": 2.0}
    assert result["bound"]["link_mbit"] == 80.0 and result["bound"]["slots"] == {
        "onprem": 1, "cloud": 1}
    default, aware = result["runs"]["default"], result["runs"]["data-aware"]
    assert default["makespan_over_bound"] == 1.25 and aware["makespan_over_bound"] == 1.5
    # against the bound of its own slower tasks the data-aware run would look perfect
    assert aware["diagnostic_own_compute_bound_s"] == pytest.approx(6.0)
    assert aware["makespan_s"] / aware["diagnostic_own_compute_bound_s"] == pytest.approx(1.0)
    assert result["speedup"] == pytest.approx(5 / 6, abs=1e-3)
    assert result["compute_ratio"] == 1.5
    assert aware["compute_s_mean_by_site"] == {"onprem": 3.0, "cloud": 3.0}
    assert aware["scheduler_cpu_s"] == 2.5 and aware["site_cpu_s"] == {"onprem": 9.0,
                                                                     "cloud": 7.0}
    # each site's slot computed 6 s of 6 s in data-aware, 4 s of 5 s in default
    assert aware["idle_slot_s"] == {"onprem": 0.0, "cloud": 0.0}
    assert default["idle_slot_s"] == {"onprem": 1.0, "cloud": 1.0}
    assert result["site_cpus"] == {"onprem": [0], "cloud": [1]}


def test_a_slower_cloud_raises_the_bound() -> None:
    slower = Calibration(("t0",), {"onprem": [2.0], "cloud": [4.0]}, {})
    result = summarize(CONFIG, TASKS, {"default": run("default", 5.0, 2.0, {
        "own": 0.1, "onprem": 1.0, "cloud": 1.0})}, {}, WORKERS, 2, slower, {})
    # x on-prem seconds to the cloud take 2x there: 8 - x = 2x -> 16/3 s
    assert result["lower_bound_s"] == pytest.approx(16 / 3, abs=1e-3)


def test_the_table_and_the_figure_use_the_one_bound() -> None:
    result = summary()
    table = format_table(result)
    rows = {line.split()[0]: line.split() for line in table.splitlines()[3:5]}
    assert rows["default"][1:5] == ["5.00", "1.250", "2.00", "0.3"]
    assert rows["data-aware"][1:5] == ["6.00", "1.500", "3.00", "2.5"]
    assert "lower bound 4.00 s for both schedulers" in table
    figure = makespan_plot(result)
    span = figure.axes[0]
    [bound_line] = span.get_lines()
    assert numpy.asarray(bound_line.get_ydata(), dtype=float).tolist() == [4.0, 4.0]
    assert [t.get_text() for t in span.get_xticklabels()] == [
        "default\n1.25× bound", "data-aware\n1.50× bound"]


def test_the_bound_pools_every_pass_and_the_default_runs_tasks_by_their_mean() -> None:
    first = Calibration(("t1",), {"onprem": [2.0], "cloud": [1.0]}, {"onprem": [1.8]})
    second = Calibration(("t1",), {"onprem": [2.0]}, {"onprem": [1.8]})
    default = run("default", 5.0, 5.0, {"own": 0.3, "onprem": 6.0, "cloud": 5.0})
    pooled = Calibration.pooled([first, Calibration.from_run("default", default.records),
                                 second])
    assert pooled.tasks == ("t1",) and pooled.passes == 2 and pooled.runs == ("default",)
    # on-prem: 2, 2 from the passes and the default run's two 5 s tasks; the mean, as the
    # bound sums compute (the cloud's median, 5, would not be its mean)
    assert pooled.compute_s == {"onprem": 3.5, "cloud": pytest.approx((1.0 + 5.0 + 5.0) / 3)}
    assert pooled.compute_cpu_s == {"onprem": pytest.approx((1.8 * 2 + 4.5 * 2) / 4),
                                    "cloud": 4.5}
    assert pooled.to_dict()["runs"] == ["default"]


def test_the_fetching_site_pays_the_link_on_prem_for_s3_the_cloud_for_nfs() -> None:
    """Six 1 s tasks of 1 MB; two on-prem slots, one cloud slot, 1 MB/s on the shaped path.
    nfs: the cloud fetches, x tasks there: max((6 - x) / 2, x, x) is least at x = 2: 2 s.
    s3: on-prem fetches (the bucket sits at the cloud's end), x tasks there:
    max(6 - x, x / 2, x) is least at x = 3: 3 s. An unshaped path charges nothing: 2 s."""
    workers = [NodeInfo("hpc-id", "onprem", "hpc", 2, "198.18.0.2"),
               NodeInfo("cloud-id", "cloud", "cloud", 1, "198.18.1.1")]
    tasks = [TaskSpec(f"t{i}", i, (f"f{i}",), MB) for i in range(6)]
    calibration = Calibration(("t0",), {"onprem": [1.0], "cloud": [1.0]}, {})
    nfs = BurstOptions(lab="netns", bandwidth_mbit=8.0)
    s3 = BurstOptions(lab="netns", bandwidth_mbit=80.0, data="s3", bucket="b",
                      s3_link_mbit=8.0)
    unshaped = BurstOptions(lab="netns", bandwidth_mbit=8.0, data="s3", bucket="b")
    bound = {name: common_bound(config, tasks, calibration, workers, 1)
             for name, config in (("nfs", nfs), ("s3", s3), ("unshaped", unshaped))}
    assert bound == pytest.approx({"nfs": 2.0, "s3": 3.0, "unshaped": 2.0})
