"""docs/doll.md's "Simulate first, then run it for real", as shown: a policy file outside the
built-ins, a parameter of it swept (one subclass per value), evaluated with sim-doll over a
folder of capacity traces and many start points (intervals, figures, provenance), then the
best setting run on the lab."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.acceptance import run_documented

SIMULATE = (
    "invoke sim-doll --policy on-demand,uniform-progress,examples/doll/margin.py:Margin0,"
    "examples/doll/margin.py:Margin1,examples/doll/margin.py:Margin2 "
    "--capacity-trace examples/doll/traces --starts 40"
)
RUN_FOR_REAL = (
    "invoke run-doll --policy on-demand,examples/doll/margin.py:Margin2 "
    "--capacity-trace examples/doll/traces/zone-b.json --start 600"
)


@pytest.mark.subprocess
def test_a_swept_policy_is_simulated_over_a_folder_of_traces(tmp_path: Path) -> None:
    out = tmp_path / "sim"
    summary = run_documented(SIMULATE, out, timeout_s=600)
    policies = summary["policies"]
    assert set(policies) == {"on-demand", "uniform-progress", "Margin0", "Margin1", "Margin2"}
    rows = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert len(rows) == 5 * 3 * 40 and not any(row["failed"] for row in rows)
    assert {row["capacity_trace"] for row in rows} == {"zone-a.json", "zone-b.json",
                                                       "zone-c.json"}
    for name, result in policies.items():
        assert result["runs"] == 120 and result["failed"] == 0, name
        low, high = result["cost_ratio_ci95"]
        assert low <= result["cost_ratio"] <= high, name
        # 40 start points on 1,200 ticks, each run's deadline spanning about 90 of them:
        # overlapping windows count once
        assert result["independent_windows"] < 120, name
    assert policies["on-demand"]["cost_ratio"] == 1.0
    # the sweep's trade-off: a larger margin costs more and misses fewer deadlines
    ratios = [policies[f"Margin{m}"]["cost_ratio"] for m in (0, 1, 2)]
    misses = [policies[f"Margin{m}"]["deadline_miss_rate"] for m in (0, 1, 2)]
    assert ratios == sorted(ratios) and misses == sorted(misses, reverse=True)
    assert misses[2] == 0.0 and ratios[2] < 1.0
    for figure in ("cost_vs_misses.png", "cost_ratio_cdf.png"):
        assert (out / figure).stat().st_size > 10_000, figure
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["inputs"]["policy_file"]["file"] == "margin.py"
    assert {f"capacity_trace zone-{z}.json" for z in "abc"} <= set(provenance["inputs"])


@pytest.mark.ray
@pytest.mark.subprocess
@pytest.mark.slow
def test_the_best_setting_runs_on_the_lab(tmp_path: Path) -> None:
    out = tmp_path / "lab"
    summary = run_documented(RUN_FOR_REAL, out, timeout_s=1200)
    policies = summary["policies"]
    assert set(policies) == {"on-demand", "Margin2"}
    margin = policies["Margin2"]
    assert margin["batches"] >= 2000 and margin["mean_spot_workers"] > 0
    assert 0.0 < margin["cost_ratio"] < 1.0
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["parameters"]["start"] == 600
    assert provenance["inputs"]["capacity_trace"]["file"] == "zone-b.json"
