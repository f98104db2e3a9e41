"""The lab path's burst driver is followed by the progress watchdog: a driver that stops
printing is killed and the run fails as stalled instead of hanging (the lab is then removed
by the caller's `with`)."""

from __future__ import annotations

import sys
import time

import pytest

import procs
from launch.burst import run_driver
from launch.watchdog import RunStalled
from netem.lab import LabDescription
from vocab.burst import SITE_ONPREM

pytestmark = [pytest.mark.subprocess]

HANGS_AFTER_ONE_LINE = (
    "import os, sys, time\n"
    "print('driver', os.getpid(), flush=True)\n"
    "print('2024-01-01 00:00:00,000\\tINFO worker.py -- Ray chatter is no progress', flush=True)\n"
    "time.sleep(120)\n"
)


def here() -> LabDescription:
    """A lab description whose on-prem site is this machine as it is (no namespace)."""
    return LabDescription(
        lab_id="t", kind="netns", profile="100m", profile_source="builtin:100m",
        shaping={"rate_mbit": {}, "delay_applied": False}, notes=[], ray_address="",
        dashboard_url="", env={}, storage={}, s3_endpoint_url="", s3_credentials={},
        site_prefixes={SITE_ONPREM: []}, site_cidrs={}, nodes=[], temp_dir="", state_file="",
    )


def test_a_driver_that_prints_no_progress_is_stopped() -> None:
    lines: list[str] = []
    started = time.monotonic()
    with pytest.raises(RunStalled, match="--stall-timeout"):
        run_driver(here(), [sys.executable, "-c", HANGS_AFTER_ONE_LINE], lines.append,
                   stall_timeout_s=2.0)
    assert time.monotonic() - started < 60  # not the child's 120 s
    pid = int(lines[0].split()[1])
    assert not procs.is_alive(pid)
    assert any("Ray chatter" in line for line in lines)  # shown, but not counted


def test_a_driver_that_keeps_printing_runs_to_its_end() -> None:
    lines: list[str] = []
    script = "import time\nfor i in range(4):\n    print('step', i, flush=True); time.sleep(0.5)\n"
    run_driver(here(), [sys.executable, "-c", script], lines.append, stall_timeout_s=1.5)
    assert lines == [f"step {i}" for i in range(4)]
