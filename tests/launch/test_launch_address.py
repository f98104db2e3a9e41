"""`--address`: a Ray Job on a real local `ray start --head` (token auth on, as Ray 2.60
sets it up), code uploaded as the job's working dir, results back through the log or an
S3 bucket.

The head runs from a Python environment with ONLY `ray[default]` at the pinned version, so
the DOLL run also proves that dependencies reach the cluster: the job's runtime_env
pip-installs the workload's pinned imports (numpy, scikit-learn, matplotlib, boto3). One
head, built once for the module, serves every test here (Ray keeps the job environment it
built, so the later jobs with the same pins reuse it)."""

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import boto3
import pytest

from launch.requirements import pinned_requirements
from launch.targets import PROJECT_DIR, Remote, run_remote, run_workload
from launch.working_dir import CODE_PACKAGES
from launch.workload import WorkloadRun
from tests.helpers.doll import TINY_DOLL_ARGS as TINY
from tests.helpers.doll import one_price_trace
from tests.helpers.processes import FAKE_CREDENTIALS, moto_server, ray_head
from workloads.common.provenance import sha256_of

pytestmark = [pytest.mark.ray, pytest.mark.moto, pytest.mark.subprocess]


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture(scope="module")
def bare_bin() -> Iterator[Path]:
    """A venv holding ray[default] at this project's pinned version and nothing else (in
    its own temp dir: pytest's rotating basetemp is shared with other runs on this host).
    Installed without compiling every module up front (Python compiles what it imports);
    it keeps its own pip, which Ray's job environment, a clone of it, installs with."""
    with tempfile.TemporaryDirectory(prefix="bare-ray-", dir="/tmp") as folder:
        venv = Path(folder) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pin = f"ray[default]=={version('ray')}"
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile", pin],
            check=True,
        )
        yield venv / "bin"


@pytest.fixture(scope="module")
def address(bare_bin: Path) -> Iterator[str]:
    # PIP_COMPILE=false: the job environment's pip install does not byte-compile every
    # module of numpy, scipy, scikit-learn, matplotlib and botocore up front either.
    env = {**FAKE_CREDENTIALS, "PIP_COMPILE": "false"}
    with ray_head(extra_env=env, bin_dir=bare_bin) as url:
        yield url


def test_the_workload_pins_are_derived_from_its_imports() -> None:
    pins = pinned_requirements(PROJECT_DIR, "workloads.doll", CODE_PACKAGES)
    assert f"numpy=={version('numpy')}" in pins
    assert f"scikit-learn=={version('scikit-learn')}" in pins  # imported as sklearn
    assert f"boto3=={version('boto3')}" in pins  # imported lazily, inside a function
    assert not any(pin.lower().startswith(("ray==", "spotburst==")) for pin in pins)
    assert pins == sorted(pins, key=str.lower)


@pytest.mark.slow  # the job's environment: numpy, scikit-learn, matplotlib, boto3 installed
def test_job_runs_the_uploaded_code_on_a_head_with_only_ray_and_results_come_back_in_its_log(
    bare_bin: Path, address: str, tmp_path: Path
) -> None:
    missing = subprocess.run(
        [str(bare_bin / "python"), "-c", "import numpy"], capture_output=True, text=True
    )
    assert "No module named 'numpy'" in missing.stderr  # the head's Python really is bare
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
    assert provenance["numpy"] == version("numpy")
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
        s3_endpoint=endpoint,  # the job's environment: the pinned one the test above built
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
