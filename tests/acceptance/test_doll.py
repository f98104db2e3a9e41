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
