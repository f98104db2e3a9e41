"""A Ray Job's end (its log stream may close before the job leaves RUNNING), and its log
without Ray's own crash output (real samples from lab runs in ray_logs/)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from ray.job_submission import JobStatus

from launch import ray_jobs
from launch.ray_jobs import (
    RayTraceDiverter,
    ray_log_lines_shown,
    ray_trace_line,
    wait_for_end,
    without_ray_traces,
)


def test_a_job_still_running_when_its_log_closes_is_waited_for() -> None:
    answers = iter([JobStatus.RUNNING, JobStatus.RUNNING, JobStatus.SUCCEEDED])
    asked = []

    def status() -> JobStatus:
        asked.append(1)
        return next(answers)

    assert wait_for_end(status, timeout_s=30, poll_s=0) == JobStatus.SUCCEEDED
    assert len(asked) == 3


def test_a_job_that_never_ends_is_reported_as_it_is_at_the_timeout() -> None:
    assert wait_for_end(lambda: JobStatus.RUNNING, timeout_s=0, poll_s=0) == JobStatus.RUNNING
    assert wait_for_end(lambda: JobStatus.FAILED, timeout_s=30, poll_s=0) == JobStatus.FAILED


SAMPLES = Path(__file__).with_name("ray_logs")


def split(sample: str) -> tuple[list[str], list[str]]:
    """A sample's lines: (kept for the user, diverted as Ray's crash output)."""
    shown: list[str] = []
    diverted: list[str] = []
    in_block = False
    for line in (SAMPLES / sample).read_text().splitlines():
        in_block = ray_trace_line(line, in_block)
        (diverted if in_block else shown).append(line)
    return shown, diverted


def test_a_raylet_killed_under_a_running_job_is_diverted_whole() -> None:
    """A job's log when a worker node's raylet got SIGSEGV: its signal report, frames and
    death notice (with the raylet's last log lines) go; the driver's lines and Ray's
    one-line note that the node died stay."""
    shown, diverted = split("raylet_sigsegv_job.log")
    assert [line for line in shown if line.startswith("driver:")] == [
        "driver: started", *(f"driver: round {n} [0, 1]" for n in range(5)), "driver: done"]
    assert len(shown) == 10  # the driver's 7, Ray's connect line, the node-died note (2)
    assert any("has been marked dead" in line for line in shown)
    assert len(diverted) == 25
    assert not any(marker in line for line in shown for marker in (
        "SIGSEGV", "@     0x", "Raylet is terminated", "[state-dump]"))


def test_a_fatal_signal_report_ends_at_the_next_ordinary_line() -> None:
    shown, diverted = split("driver_sigterm.log")
    assert [line.split("] ", 1)[1][:30] for line in diverted] == [
        "logging.cc:474: *** SIGTERM re", "logging.cc:474: PC: @     0x7f",
        "logging.cc:474:     @     0x7f"]
    assert "Sending disconnect message" in shown[2]


@pytest.mark.parametrize("line", [
    "[2026-11-26 23:30:01,002 C 4242 4242] (raylet) grpc_server.cc:120: Check failed: server_",
    "\x1b[33m(raylet)\x1b[0m *** SIGTERM received at time=1795735640 on cpu 1 ***",
    "(work pid=77, ip=192.0.2.2) *** SIGABRT received at time=1 on cpu 0 ***",
])
def test_a_block_starts_at_a_failed_check_or_a_signal_report(line: str) -> None:
    assert ray_trace_line(line, in_block=False)


def test_the_raylets_worker_pool_warning_is_diverted_alone(tmp_path: Path) -> None:
    """As a DOLL run on 2 cores prints it (its fleet of 20 actors, by design)."""
    warning = ("\x1b[33m(raylet)\x1b[0m WARNING: 8 PYTHON worker processes have been started "
               "on node: fe98ede761b7edde04d140ead27071a056b70be47614e7f881bcf8ed with address: "
               "192.0.2.2, which is 4x the maximum expected startup concurrency (2). This could "
               "be a result of using a large number of actors, tasks blocked in ray.get() calls, "
               "or tasks with fractional CPU requests (e.g., num_cpus=0.1) allowing high "
               "concurrency. See https://github.com/ray-project/ray/issues/3644 for some "
               "discussion of workarounds.")
    lines = ["stream workers: 12/20 up (4 spares)", warning, "    an indented line of the run",
             "", "stream workers: 15/20 up (4 spares)"]
    assert without_ray_traces(lines) == [lines[0], *lines[2:]]  # it opens no block
    shown: list[str] = []
    diverter = RayTraceDiverter(shown.append, tmp_path / "ray-traces.log")
    for line in [*lines, warning]:
        diverter(line)
    assert shown == [lines[0], f"(Ray's own worker-pool warnings are in "
                     f"{tmp_path / 'ray-traces.log'})", *lines[2:]]  # announced once
    assert (tmp_path / "ray-traces.log").read_text() == f"{warning}\n{warning}\n"
    assert not ray_trace_line("WARNING: the deadline was missed by 2 s", in_block=False)


@pytest.mark.parametrize("line", [
    "elastic: step 40/300 on 3 workers",
    "    File \"train.py\", line 3, in <module>",  # indented, but no block is open
    "RuntimeError: check failed on the input",
])
def test_ordinary_lines_start_no_block(line: str) -> None:
    assert not ray_trace_line(line, in_block=False)


def test_the_diverter_writes_the_blocks_to_the_file_and_says_so_once(tmp_path: Path) -> None:
    shown: list[str] = []
    diverter = RayTraceDiverter(shown.append, tmp_path / "run" / "ray-traces.log")
    lines = (SAMPLES / "raylet_sigsegv_job.log").read_text().splitlines()
    for line in lines:
        diverter(line)
    notices = [line for line in shown if "Ray's own " in line]
    assert notices == [f"(Ray's own log lines are in {tmp_path / 'run' / 'ray-traces.log'})",
                       f"(Ray's own crash output is in {tmp_path / 'run' / 'ray-traces.log'})"]
    # the crash output's 25 lines and Ray's line that it connected
    assert len(shown) == 11 and diverter.diverted == 26
    assert (tmp_path / "run" / "ray-traces.log").read_text().count("\n") == 26
    connected = [line for line in lines if "Connected to Ray cluster" in line]
    assert len(connected) == 1 and connected[0] not in shown
    assert without_ray_traces(lines) == [
        line for line in lines if line in shown or line in connected]


def test_a_failed_check_and_its_stack_trace_are_diverted() -> None:
    """A raylet whose node-manager port was taken (raylet.err, frames trimmed): gRPC's own
    error line stays, the failed check and every frame after it go."""
    shown, diverted = split("raylet_check_failed.log")
    assert len(shown) == 1 and "No address added" in shown[0]
    assert "Check failed: server_ Failed to start the grpc server" in diverted[0]
    assert diverted[1] == "*** StackTrace Information ***" and len(diverted) == 10


def test_a_spot_nodes_preemption_under_a_job_leaves_one_line_of_ray_in_view() -> None:
    """A spot lab node preempted under a running job (notice, drain, kill): Ray reports the
    raylet's end twice with its last 20 log lines; the user keeps the driver's lines and
    Ray's one line that the task is retried."""
    shown, diverted = split("spot_node_preempted_job.log")
    assert [line for line in shown if not line.startswith("driver:")][1:] == [
        "\x1b[33m(raylet)\x1b[0m Task work failed due to node preemption. The task will be "
        "retried, but the retry will not count against the normal retry count."]
    assert len(shown) == 8 and len(diverted) == 43
    assert sum("Raylet is terminated" in line for line in diverted) == 2


RAY_TRAIN_LINES = [
    "\x1b[36m(TrainController pid=4242)\x1b[0m Attempting to start training worker group of "
    "size 4 with the following resources: [{'CPU': 1}] * 4",
    "(RayTrainWorker pid=4250, ip=192.0.2.2) Setting up process group for: env:// [rank=0, "
    "world_size=4]",
    "2026-11-26 23:27:14,553\tINFO worker.py:2029 -- Connected to Ray cluster. View the "
    "dashboard at http://127.0.0.1:46951 ",
]


def test_ray_trains_and_rays_own_log_lines_go_to_the_file_unless_verbose(
        tmp_path: Path) -> None:
    run_lines = ["elastic: step 40/300 on 3 workers", "elastic: notice for spot-1"]
    lines = [run_lines[0], *RAY_TRAIN_LINES, run_lines[1],
             "2026-11-26 23:27:15,001\tERROR worker.py:1 -- a failure stays in view"]
    shown: list[str] = []
    diverter = RayTraceDiverter(shown.append, tmp_path / "ray-traces.log")
    for line in lines:
        diverter(line)
    assert shown == [run_lines[0], f"(Ray's own log lines are in {tmp_path / 'ray-traces.log'})",
                     run_lines[1], lines[-1]]
    assert (tmp_path / "ray-traces.log").read_text().splitlines() == RAY_TRAIN_LINES
    verbose: list[str] = []
    with ray_log_lines_shown(True):
        diverter = RayTraceDiverter(verbose.append, tmp_path / "verbose.log")
    for line in lines:
        diverter(line)
    assert verbose == lines and not (tmp_path / "verbose.log").exists()
class _HeadDiesMidRun:
    """A Jobs client whose log stream breaks off after one line, as when the head is killed
    (Ray's SDK raises RuntimeError for a WebSocket closed abnormally)."""

    def __init__(self) -> None:
        self.stopped: list[str] = []

    def submit_job(self, **_: object) -> str:
        return "raysubmit_1"

    async def _tail(self) -> AsyncIterator[str]:
        yield "step 1\n"
        raise RuntimeError("WebSocket connection closed unexpectedly with close code 1006")

    def tail_job_logs(self, job_id: str) -> AsyncIterator[str]:
        return self._tail()

    def stop_job(self, job_id: str) -> bool:
        self.stopped.append(job_id)
        raise ConnectionRefusedError("the head is gone")


def test_a_head_killed_mid_run_ends_the_run_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = _HeadDiesMidRun()
    monkeypatch.setattr(ray_jobs, "jobs_client", lambda address, token: client)
    shown: list[str] = []
    with pytest.raises(ray_jobs.JobFailed) as failed:
        ray_jobs.run_job("http://127.0.0.1:8265", tmp_path, ["-m", "x"], {}, show=shown.append,
                         trace_log=tmp_path / "traces.log")
    assert str(failed.value) == (
        "Ray job raysubmit_1: its log stream from http://127.0.0.1:8265 broke off (WebSocket "
        "connection closed unexpectedly with close code 1006); the cluster's head may be gone")
    assert client.stopped == ["raysubmit_1"]  # it was asked to stop, in case it runs on
    assert "step 1" in shown


class _QuietRun:
    """A Jobs client that logs what Ray's own client logs in the launcher's process (through
    Ray's loggers, as its SDK does): the package upload before the job, the WebSocket's close
    after it."""

    def submit_job(self, **_: object) -> str:
        logging.getLogger("ray._private.runtime_env.packaging").info(
            "Creating a file package for local module '/tmp/job'.")
        logging.getLogger("ray.dashboard.modules.dashboard_sdk").info(
            "Uploading package gcs://_ray_pkg_1.zip.")
        return "raysubmit_2"

    async def _tail(self) -> AsyncIterator[str]:
        yield "step 1\n"
        logging.getLogger("ray.dashboard.modules.job.sdk").info(
            "WebSocket closed for job raysubmit_2 with close code 1000")

    def tail_job_logs(self, job_id: str) -> AsyncIterator[str]:
        return self._tail()

    def get_job_status(self, job_id: str) -> JobStatus:
        return JobStatus.SUCCEEDED

    def get_job_logs(self, job_id: str) -> str:
        return "step 1\n"


@pytest.mark.parametrize("verbose", [False, True])
def test_rays_own_lines_from_the_launchers_process_go_to_the_file_unless_verbose(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str],
        verbose: bool) -> None:
    monkeypatch.setattr(ray_jobs, "jobs_client", lambda address, token: _QuietRun())
    shown: list[str] = []
    with ray_log_lines_shown(verbose):
        ray_jobs.run_job("http://127.0.0.1:8265", tmp_path, ["-m", "x"], {},
                         show=shown.append, trace_log=tmp_path / "ray-traces.log")
    ours = ("Creating a file package", "Uploading package", "WebSocket closed for job")
    assert not any(text in capfd.readouterr().err for text in ours)  # Ray's own handler's
    in_view = [line for line in shown if any(text in line for text in ours)]
    if verbose:
        assert len(in_view) == 3
    else:
        assert not in_view and "step 1" in shown
        kept = (tmp_path / "ray-traces.log").read_text()
        assert all(text in kept for text in ours)
    assert logging.getLogger("ray").handlers[0].__class__.__name__ == "PlainRayHandler"
