"""A Ray Job's end: its log stream may close before the job leaves RUNNING."""

from __future__ import annotations

from ray.job_submission import JobStatus

from launch.ray_jobs import wait_for_end


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
