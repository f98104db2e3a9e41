"""`--address`: a Ray Job on a real local `ray start --head` (token auth on, as Ray 2.60
sets it up), code uploaded as the job's working dir, results back through an S3 bucket.

A job whose results come back through its log, and one that fails, run on a head that has
only Ray (tests/launch/test_bare_head.py): the same `--address` path, with the job's
pinned environment pip-installed as well."""

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from ray.job_submission import JobStatus, JobSubmissionClient

from launch.ray_jobs import run_job, wait_for_end
from launch.ray_private import use_token_auth_if_available
from launch.targets import Remote, run_remote
from launch.watchdog import RunStalled
from launch.workload import WorkloadRun
from tests.helpers.doll import TINY_DOLL_ARGS as TINY
from tests.helpers.processes import FAKE_CREDENTIALS, moto_server, ray_head

pytestmark = [pytest.mark.ray, pytest.mark.moto, pytest.mark.subprocess]


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture(scope="module")
def address(endpoint: str) -> Iterator[str]:
    with ray_head(extra_env=FAKE_CREDENTIALS) as url:
        yield url


def test_results_come_back_through_a_bucket(
    address: str, endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="doll-results")
    remote = Remote(
        address=address,
        label="stack:test",
        bucket="doll-results",
        region="us-east-1",
        s3_endpoint=endpoint,
        same_python=True,  # the pip-installed environment is test_bare_head's subject
    )
    run_remote(
        WorkloadRun(name="doll", module="workloads.doll", args=TINY),
        remote,
        tmp_path / "out",
        print,
    )
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["target"] == "stack:test"
    keys = [
        item["Key"]
        for item in boto3.client("s3", endpoint_url=endpoint).list_objects_v2(
            Bucket="doll-results"
        )["Contents"]
    ]
    assert any(key.startswith("results/doll/") and key.endswith("/summary.json") for key in keys)


SILENT_AFTER_ONE_LINE = (
    "import time\n"
    "print('step 1 of 100', flush=True)\n"
    "for _ in range(600):\n"  # Ray's own chatter is no progress (an unplaceable run's)
    "    print('(autoscaler +1m2s) No available node types can fulfill resource requests "
    "{\"CPU\": 2.0}', flush=True)\n"
    "    time.sleep(0.5)\n"
)


def test_a_run_that_prints_no_progress_is_stopped_by_the_watchdog(
    address: str, tmp_path: Path
) -> None:
    (tmp_path / "job.py").write_text(SILENT_AFTER_ONE_LINE)
    shown: list[str] = []
    with pytest.raises(RunStalled, match="no progress for 30 s"):
        run_job(address, tmp_path, ["job.py"], {}, shown.append, python=sys.executable,
                stall_timeout_s=30)
    assert "step 1 of 100" in shown and any("(autoscaler" in line for line in shown)
    use_token_auth_if_available()
    client = JobSubmissionClient(address)
    [job] = [job for job in client.list_jobs() if job.entrypoint.endswith("job.py")]
    job_id = job.submission_id
    assert job_id is not None
    assert wait_for_end(lambda: client.get_job_status(job_id)) == JobStatus.STOPPED
