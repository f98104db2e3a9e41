"""The spot-lab start benchmark: its verdict against the targets, and one real small run
(a head and one node) that writes its numbers and exits 1 when a target is missed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.spotlab_start import MEASURES, verdict

REPO = Path(__file__).resolve().parents[2]


TARGETS = {"ready_s": 30.0, "replacement_join_after_delay_s": 10.0}


def rows(*pairs: tuple[float, float]) -> list[dict[str, float]]:
    return [{"ready_s": ready, "replacement_join_after_delay_s": join} for ready, join in pairs]


def test_the_slowest_repeat_decides() -> None:
    measured = verdict(rows((12.0, 3.0), (31.0, 2.0), (14.0, 9.5)), TARGETS)
    assert measured["ready_s"] == {"median": 14.0, "max": 31.0, "target": 30.0, "met": False}
    assert measured["replacement_join_after_delay_s"]["met"] is True
    assert verdict(rows((30.0, 10.0)), TARGETS)["ready_s"]["met"] is True


@pytest.mark.ray
@pytest.mark.subprocess
def test_a_run_writes_its_numbers_and_fails_on_a_missed_target(tmp_path: Path) -> None:
    out = tmp_path / "start.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.spotlab_start", "--repeats", "1", "--nodes", "1",
         "--no-dashboard", "--ready-target", "600", "--drain-target", "600",
         "--kill-late-target", "600", "--join-target", "0", "--quiet",
         "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "SPOTBURST_SPOTLAB_STATE_DIR": str(tmp_path / "labs")})
    assert done.returncode == 1, done.stderr[-2000:]
    numbers = json.loads(out.read_text())
    (row,) = numbers["rows"]
    assert set(row["node_start_to_join_s"]) == {"head", "spot-0"}
    assert 0 < row["ready_s"] < 600 and row["replacement_join_after_delay_s"] > 0
    assert row["drain_after_notice_s"] >= 0 and row["kill_after_deadline_s"] >= -0.01
    assert set(numbers["verdict"]) == set(MEASURES)
    assert numbers["verdict"]["ready_s"]["met"] is True
    assert numbers["verdict"]["replacement_join_after_delay_s"]["met"] is False
    assert "target <= 0 s: MISSED" in done.stdout
    assert not list((tmp_path / "labs").glob("*.json"))  # every lab it started is gone
    assert numbers["made"]["cores"] == os.cpu_count() and numbers["made"]["commit"]
    report = (tmp_path / "start.md").read_text()
    assert report.startswith("`python -m benchmarks.spotlab_start --repeats 1")
    assert "target <= 0 s: MISSED" in report


@pytest.mark.subprocess
def test_it_runs_as_a_module_from_anywhere(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.spotlab_start", "--help"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0 and done.stdout.startswith(
        "usage: python -m benchmarks.spotlab_start")
