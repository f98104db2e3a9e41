"""`--address`: a Ray Job on a real local `ray start --head` (token auth on, as Ray 2.60
sets it up), code uploaded as the job's working dir, results back through the log or an
S3 bucket."""

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from launch.targets import Remote, run_remote, run_workload
from launch.workload import WorkloadRun
from tests.helpers.doll import TINY_DOLL_ARGS
from tests.helpers.processes import FAKE_CREDENTIALS, moto_server, ray_head
from workloads.common.provenance import sha256_of

TINY = TINY_DOLL_ARGS


pytestmark = [pytest.mark.ray, pytest.mark.moto, pytest.mark.subprocess]


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture(scope="module")
def address(endpoint: str) -> Iterator[str]:
    with ray_head(extra_env=FAKE_CREDENTIALS) as url:
        yield url


def one_price_trace(folder: Path) -> Path:
    trace = folder / "flat.json"
    record = {
        "AvailabilityZone": "lab-1a",
        "InstanceType": "c5.xlarge",
        "ProductDescription": "Linux/UNIX",
        "SpotPrice": "0.05",
        "Timestamp": "2024-01-01T00:00:00+00:00",
    }
    trace.write_text(json.dumps({"SpotPriceHistory": [record]}))
    return trace


def test_job_runs_the_uploaded_code_and_results_come_back_in_its_log(
    address: str, tmp_path: Path
) -> None:
    trace = one_price_trace(tmp_path)
    run = WorkloadRun(
        name="doll",
        module="workloads.doll",
        args=(*TINY, "--zone", "lab-1a", "--product", "Linux/UNIX"),
        inputs={"--trace": trace},
    )
    shown: list[str] = []
    out = run_workload(run, address=address, out=tmp_path / "results", show=shown.append)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["target"] == f"address:{address}"
    assert summary["trace"] == {"file": "flat.json", "zone": "lab-1a", "product": "Linux/UNIX"}
    assert summary["policies"]["on-demand"]["batches"] == 40
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["inputs"]["trace"]["sha256"] == sha256_of(trace)
    assert (out / "records" / "on-demand_timeline.jsonl").stat().st_size > 0
    assert any(line.startswith("[on-demand] done") for line in shown)  # the log streamed
    assert not any(line.startswith("@@spotburst-results@@") for line in shown)


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
        same_python=True,  # the pip-installed environment is the test above's subject
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


def test_a_failing_job_reports_its_error(address: str, tmp_path: Path) -> None:
    run = WorkloadRun(name="doll", module="workloads.doll", args=("--zone", "nowhere-1z"))
    with pytest.raises(RuntimeError, match="nowhere-1z"):
        run_workload(run, address=address, out=tmp_path / "results", show=lambda line: None)
    assert not (tmp_path / "results").exists()
