"""`invoke run-burst --bw 100` as docs/burst.md shows it: the two-site lab, the calibration,
both schedulers on every task, one lower bound for both, the speedup, the CPU each site and
the scheduler used, the figures; the lab gone afterwards."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from netem.lab.netns import existing_namespaces
from tests.helpers.acceptance import PROJECT_DIR, run_documented
from tests.helpers.lab import needs_netns

COMMAND = "invoke run-burst --bw 100"
OWN_COMMAND = ("invoke run-burst -f examples/burst/word_stats.py --function process "
               "--inputs examples/burst/texts --bw 100")

pytestmark = [pytest.mark.lab, pytest.mark.ray, pytest.mark.subprocess, pytest.mark.slow,
              needs_netns]


def test_run_burst_measures_both_schedulers_against_one_bound(tmp_path: Path) -> None:
    out = tmp_path / "burst"
    summary = run_documented(COMMAND, out, timeout_s=1200)
    assert summary["lab"] == "netns" and summary["bandwidth_mbit"] == 106.0
    assert summary["workload"] == "image" and summary["data"] == "nfs"
    bound = summary["lower_bound_s"]
    assert bound > 0 and summary["bound"]["link_mbit"] == 106.0
    assert set(summary["bound"]["compute_s"]) == {"onprem", "cloud"}
    runs = summary["runs"]
    assert set(runs) == {"default", "data-aware"}
    for name, run in runs.items():
        assert run["tasks"] == summary["task_count"] == 48, name  # every task, once
        records = (out / "records" / f"tasks_{name}.jsonl").read_text().splitlines()
        assert sorted(json.loads(line)["task"] for line in records) == [
            f"img-{i:04d}" for i in range(48)]
        assert run["makespan_over_bound"] == pytest.approx(  # from unrounded times
            run["makespan_s"] / bound, rel=5e-3), name
        assert run["makespan_over_bound"] > 0.5, name  # a bound, not a guess far above
        assert run["compute_s_mean"] > 0 and run["scheduler_cpu_s"] > 0, name
        assert run["site_cpu_s"]["onprem"] > 0 and run["site_cpu_s"]["cloud"] > 0, name
    assert runs["data-aware"]["tasks_on_cloud"] > 0
    assert summary["speedup"] == round(
        runs["default"]["makespan_s"] / runs["data-aware"]["makespan_s"], 3)
    assert summary["compute_ratio"] > 0
    sites = summary["site_cpus"]  # each site on CPUs of its own
    assert sites["onprem"] and sites["cloud"]
    if len(os.sched_getaffinity(0)) >= 2:
        assert not set(sites["onprem"]) & set(sites["cloud"])
    for figure in ("gantt_default.png", "gantt_data-aware.png", "makespan.png"):
        assert (out / figure).stat().st_size > 10_000, figure
    provenance = json.loads((out / "provenance.json").read_text())
    lab_namespaces = {pair.split("=")[1] for pair in provenance["parameters"]["site_netns"]}
    assert len(lab_namespaces) == 3 and not lab_namespaces & existing_namespaces()  # removed


def test_your_own_task_file_gives_the_same_results_under_both_schedulers(
    tmp_path: Path,
) -> None:
    """docs/burst.md's "Your own tasks": the example's results equal calling its function
    here on each input, identical between the schedulers; the run measured as any other."""
    assert OWN_COMMAND in (PROJECT_DIR / "docs" / "burst.md").read_text()
    out = tmp_path / "own"
    summary = run_documented(OWN_COMMAND, out, timeout_s=900)
    assert summary["workload"] == "own" and summary["task_count"] == 6
    assert set(summary["runs"]) == {"default", "data-aware"}
    assert summary["lower_bound_s"] > 0 and summary["speedup"] > 0
    assert set(summary["bound"]["compute_s"]) == {"onprem", "cloud"}  # calibrated on both
    texts = PROJECT_DIR / "examples" / "burst" / "texts"
    sys.path.insert(0, str(texts.parent))
    try:
        from word_stats import process  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(texts.parent))
    expected = [{"input": entry.name, "result": process(str(entry))}
                for entry in sorted(texts.iterdir())]
    rows = {name: [json.loads(line) for line in
                   (out / "outputs" / f"{name}.jsonl").read_text().splitlines()]
            for name in ("default", "data-aware")}
    assert rows["default"] == rows["data-aware"] == expected
    # the cloud node computed on staged copies (the calibration runs every worker node)
    assert summary["bound"]["calibration"]["samples_s"]["cloud"]
