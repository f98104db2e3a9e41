"""`invoke run-doll` as the README shows it: the three policies on the paper's trace, spot
preemptions, the deadline each plan promises, the cost ratio to on-demand, the figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.acceptance import run_documented

COMMAND = "invoke run-doll"

pytestmark = [pytest.mark.ray, pytest.mark.subprocess, pytest.mark.slow]


def test_run_doll_shows_spot_policies_cheaper_than_on_demand(tmp_path: Path) -> None:
    out = tmp_path / "doll"
    summary = run_documented(COMMAND, out, timeout_s=1800)
    policies = summary["policies"]
    assert set(policies) == {"on-demand", "static", "adaptive"}
    assert policies["on-demand"]["cost_ratio"] == 1.0
    assert policies["on-demand"]["preemptions"] == 0
    for name in ("static", "adaptive"):
        policy = policies[name]
        assert policy["preemptions"] >= 1, name  # spot workers were really preempted
        assert policy["cost_ratio"] < 1.0, name
        assert policy["deadline_s"] > 0 and policy["finish_s"] > 0, name
        assert policy["accuracy"] > 0.85, name
    assert policies["static"]["deadline_probability"] >= 0.9  # the plan's promise
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["parameters"]["policies"] == ["on-demand", "static", "adaptive"]
    for figure in ("cost_vs_time.png", "accuracy_vs_cost.png", "cost_ratio.png"):
        assert (out / figure).stat().st_size > 10_000, figure


OWN_POLICY = (
    "invoke run-doll --policy on-demand,uniform-progress,examples/doll/keep_ahead.py:KeepAhead "
    "--capacity-trace examples/doll/capacity.json --batches 500"
)


def test_your_own_policy_runs_beside_uniform_progress_on_a_capacity_trace(
    tmp_path: Path,
) -> None:
    out = tmp_path / "own"
    summary = run_documented(OWN_POLICY, out, timeout_s=900)
    policies = summary["policies"]
    assert set(policies) == {"on-demand", "uniform-progress", "KeepAhead"}
    assert policies["on-demand"]["cost_ratio"] == 1.0
    for name in ("uniform-progress", "KeepAhead"):
        policy = policies[name]
        assert policy["batches"] == 500, name
        assert policy["mean_spot_workers"] > 0, name
        assert policy["cost_ratio"] < 1.0, name  # spot was used and billed at its price
        assert isinstance(policy["deadline_met"], bool) and policy["finish_s"] > 0, name
        assert policy["preemptions"] >= 1, name  # the capacity fell under the running spot
    rows = [json.loads(line) for line in (out / "records" / "capacity.jsonl").open()]
    assert {row["policy"] for row in rows} == {"on-demand", "uniform-progress", "KeepAhead"}
    assert all(row["spot_running"] <= row["spot_capacity"] for row in rows)
    assert min(row["spot_capacity"] for row in rows) < 16
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["inputs"]["policy_file"]["file"] == "keep_ahead.py"
    assert provenance["inputs"]["capacity_trace"]["file"] == "capacity.json"
    assert (out / "cost_ratio.png").stat().st_size > 10_000
