"""What counts as a run's progress: lines the workload printed, not Ray's own chatter."""

from __future__ import annotations

import pytest

from launch.watchdog import RunStalled, Watchdog, is_progress

RAY_CHATTER = [
    "(autoscaler +1m2s) Warning: The following resource request cannot be scheduled right now: "
    "{'CPU': 2.0}. This is likely due to all cluster resources being claimed by actors.",
    "(autoscaler +3m5s) No available node types can fulfill resource requests {'CPU': 2.0}*4",
    "(raylet) WARNING: 8 PYTHON worker processes have been started on node: 5973ce70 with "
    "address: 127.0.0.1.",
    "2026-11-26 23:16:25,718\tWARNING authentication_token_setup.py:85 -- Token authentication "
    "is enabled for this Ray cluster.",
    "2026-11-26 23:40:02,001\tINFO controller.py:452 -- Deciding NOT to start a worker group",
    "[2026-11-26 23:40:02,001 E 2314 2399] core_worker.cc:612: Raylet is terminated.",
    "",
    "   ",
]
WORKLOAD_LINES = [
    "[on-demand] 400/4000 batches (10%) t=6.4s of deadline 65.6s cost=$0.00099",
    "iteration 3: env steps 600, train return -1520.4",
    "(RayTrainWorker pid=2211) step 14/400 loss 0.53",
    "step 1 of 100",
]


@pytest.mark.parametrize("line", RAY_CHATTER)
def test_rays_own_chatter_is_not_progress(line: str) -> None:
    assert not is_progress(line)


@pytest.mark.parametrize("line", WORKLOAD_LINES)
def test_the_workloads_lines_are_progress(line: str) -> None:
    assert is_progress(line)


def test_a_watchdog_with_no_time_left_stops_the_run_naming_the_flag() -> None:
    watchdog = Watchdog(stall_timeout_s=0)
    watchdog.saw(RAY_CHATTER[0])
    with pytest.raises(RunStalled, match="--stall-timeout"):
        watchdog.check()
    Watchdog(stall_timeout_s=3600).check()
