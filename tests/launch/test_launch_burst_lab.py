"""`run-burst` end to end in the real two-site lab (namespaces, shaped link, Ray, moto)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from launch.burst import run_burst
from netem.lab.netns import existing_namespaces
from tests.helpers.burst_results import LAB_BANDWIDTH, read_summary, read_tasks
from tests.helpers.lab import needs_netns
from workloads.burst.options import BurstOptions

TINY_IMAGES = BurstOptions(workload="image", data="nfs", images=10, image_side=500)


@pytest.mark.lab
@pytest.mark.ray
@needs_netns
def test_run_burst_runs_both_schedulers_in_the_lab_and_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPOTBURST_LAB_STATE_DIR", str(tmp_path / "labs"))  # not the user's
    lines: list[str] = []
    labs: set[str] = set()
    folder = run_burst(
        TINY_IMAGES,
        float(LAB_BANDWIDTH),
        tmp_path / "out",
        show=lines.append,
        watch=lambda line, lab: labs.add(lab.lab_id),
    )
    summary = read_summary(folder)
    assert summary["lab"] == "netns" and summary["bandwidth_mbit"] == 106.0
    assert summary["profile"] == "100m" and summary["workload"] == "image"
    shaping = json.loads((folder / "shaping.json").read_text())
    assert shaping["lab"] == "netns" and shaping["delay_applied"] is False
    assert shaping["rate_mbit"] == {
        "onprem->cloud": 106.0, "cloud->onprem": 106.0, "onprem->s3": 106.0, "s3->onprem": 106.0}
    assert summary["data"] == "nfs" and summary["lower_bound_s"] > 0
    assert set(summary["runs"]) == {"default", "data-aware"}
    assert summary["speedup"] == round(
        summary["runs"]["default"]["makespan_s"] / summary["runs"]["data-aware"]["makespan_s"], 3
    )
    # one bound for both, from compute times measured before the data-aware run: a pass
    # before each scheduler's run (3 tasks on each worker node in each) and the default
    # run's tasks, every sample pooled, their mean per site
    calibration = summary["bound"]["calibration"]
    assert calibration["tasks"] == ["img-0001", "img-0002", "img-0003"]  # after img-0000 untimed
    assert calibration["passes"] == 2 and calibration["runs"] == ["default"]
    default_sites = [r["site"] for r in read_tasks(folder, "default")]
    assert {site: len(times) for site, times in calibration["samples_s"].items()} == {
        site: 6 + default_sites.count(site) for site in ("onprem", "cloud")}
    for site, times in calibration["samples_s"].items():
        assert summary["bound"]["compute_s"][site] == pytest.approx(
            sum(times) / len(times), abs=1e-3)
    assert summary["bound"]["link_mbit"] == 106.0
    sites = summary["site_cpus"]  # measured: the CPUs each site's processes may use
    assert sites == json.loads((folder / "provenance.json").read_text())["parameters"][
        "site_cpus"]
    assert set(sites) == {"onprem", "cloud", "s3"} and sites["onprem"] and sites["cloud"]
    for name, run in summary["runs"].items():
        records = read_tasks(folder, name)
        assert sorted(r["task"] for r in records) == [f"img-{i:04d}" for i in range(10)]
        assert all(r["output"] and r["compute_end"] > r["compute_start"] >= 0 for r in records)
        on_cloud = [r for r in records if r["site"] == "cloud"]
        assert run["tasks"] == 10 and run["tasks_on_cloud"] == len(on_cloud)
        # only cloud tasks move data (nfs is on-prem), exactly their input bytes
        assert run["bytes_to_cloud"] == sum(r["bytes"] for r in on_cloud)
        assert all(r["bytes_moved"] == (r["bytes"] if r["site"] == "cloud" else 0) for r in records)
        assert all(r["transfer_end"] <= r["compute_start"] for r in on_cloud)
        assert run["makespan_s"] >= max(r["compute_end"] for r in records) - 0.01
        assert run["makespan_over_bound"] == pytest.approx(  # from unrounded times
            run["makespan_s"] / summary["lower_bound_s"], rel=5e-3)
        assert run["compute_s_mean"] > 0 and all(r["compute_cpu_s"] > 0 for r in records)
        # the scheduler's CPU and each site's were measured during the run: the work of
        # the tasks each site computed is among its processes' CPU
        assert run["scheduler_cpu_s"] > 0
        for site in ("onprem", "cloud"):
            computed = sum(r["compute_cpu_s"] for r in records if r["site"] == site)
            assert run["site_cpu_s"][site] >= computed * 0.9
            listed = run["site_cpu_by_process_s"][site]  # kinds of ≥ 0.05 s
            assert sum(listed.values()) <= run["site_cpu_s"][site] + 0.05
            if run["site_cpu_s"][site] >= 0.5:  # a run of a second: a site's 0.1 s may
                assert listed                   # fall under 0.05 s in every kind
    aware = read_tasks(folder, "data-aware")
    assert any(r["site"] == "cloud" for r in aware), "the data-aware run never used the cloud"
    provenance = json.loads((folder / "provenance.json").read_text())
    profile = Path(__file__).resolve().parents[2] / "netem" / "profiles" / "100m.json"
    assert (
        provenance["inputs"]["profile"]["sha256"]
        == hashlib.sha256(profile.read_bytes()).hexdigest()
    )
    assert provenance["seeds"] == {"inputs": 0} and provenance["parameters"]["images"] == 10
    for figure in ("gantt_default.png", "gantt_data-aware.png", "makespan.png"):
        assert (folder / figure).stat().st_size > 1000
    assert any(line.startswith("scheduler") for line in lines)  # the table was shown
    [lab_id] = labs
    assert not [ns for ns in existing_namespaces() if ns.startswith(f"sb-{lab_id}-")]


@pytest.mark.lab
@pytest.mark.ray
@needs_netns
def test_with_s3_every_node_downloads_and_on_prem_pays_the_shaped_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--data s3: the bucket sits at the cloud's end; every task's input is downloaded by
    the node that computes it, the HPC site's through its path shaped to the link's rate
    (so no faster than it), and the bound charges that path."""
    monkeypatch.setenv("SPOTBURST_LAB_STATE_DIR", str(tmp_path / "labs"))
    options = BurstOptions(workload="image", data="s3", images=8, image_side=1600)
    lines: list[str] = []
    folder = run_burst(options, float(LAB_BANDWIDTH), tmp_path / "out", show=lines.append)
    # written into the bucket from the cloud site, then found there by the driver on-prem
    assert any(line.startswith("inputs: generating 8 image tasks at s3://") for line in lines)
    assert any(line.startswith("inputs: reusing 8 tasks at s3://") for line in lines)
    summary = read_summary(folder)
    assert summary["data"] == "s3"
    assert summary["bound"]["fetching_site"] == "onprem"
    assert summary["bound"]["link_mbit"] == 106.0
    shaping = json.loads((folder / "shaping.json").read_text())
    assert shaping["rate_mbit"]["s3->onprem"] == 106.0
    onprem_bytes = onprem_seconds = 0.0
    for name in ("default", "data-aware"):
        records = read_tasks(folder, name)
        assert len(records) == 8 and {r["site"] for r in records} == {"onprem", "cloud"}
        assert all(r["bytes_moved"] == r["bytes"] > 0 for r in records)  # every node fetched
        assert all(r["transfer_end"] <= r["compute_start"] for r in records)
        for record in records:
            if record["site"] == "onprem":
                onprem_bytes += record["bytes_moved"]
                onprem_seconds += record["transfer_end"] - record["transfer_start"]
    # an unshaped path moves these at Gbit/s; tbf's 128 KB burst lets a little through fast
    assert onprem_bytes * 8 / 1e6 / onprem_seconds <= 1.5 * 106.0
