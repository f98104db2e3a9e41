"""`--address` on a head with only Ray: a Ray head started from a Python environment with
ONLY `ray[default]` at the pinned version runs DOLL through the real `--address` path (a Ray
Job with token auth, the code uploaded as its working dir, an input file travelling with it)
to completion, because the job's runtime_env pip-installs the workload's pinned imports;
its results come back through its log. A failing job reports its error.

Slow by nature (a venv with Ray, then numpy, scikit-learn, matplotlib and boto3 installed
into the job's environment by the head): minutes, not seconds. The failing job reuses the
environment Ray built for the first (same pins)."""

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

from launch.ray_jobs import JobFailed
from launch.requirements import pinned_requirements
from launch.targets import PROJECT_DIR, run_workload
from launch.working_dir import CODE_PACKAGES
from launch.workload import WorkloadRun
from tests.helpers.doll import TINY_DOLL_ARGS as TINY
from tests.helpers.doll import one_price_trace
from tests.helpers.processes import ray_head
from workloads.common.provenance import sha256_of

pytestmark = [pytest.mark.ray, pytest.mark.subprocess, pytest.mark.slow]


@pytest.fixture(scope="module")
def bare_bin() -> Iterator[Path]:
    """A venv holding ray[default] at this project's pinned version and nothing else (in
    its own temp dir: pytest's rotating basetemp is shared with other runs on this host)."""
    with tempfile.TemporaryDirectory(prefix="bare-ray-", dir="/tmp") as folder:
        venv = Path(folder) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pin = f"ray[default]=={version('ray')}"
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", pin], check=True
        )
        yield venv / "bin"


@pytest.fixture(scope="module")
def bare_address(bare_bin: Path) -> Iterator[str]:
    with ray_head(bin_dir=bare_bin) as url:
        yield url


def test_the_workload_pins_are_derived_from_its_imports() -> None:
    pins = pinned_requirements(PROJECT_DIR, "workloads.doll", CODE_PACKAGES)
    assert f"numpy=={version('numpy')}" in pins
    assert f"scikit-learn=={version('scikit-learn')}" in pins  # imported as sklearn
    assert f"boto3=={version('boto3')}" in pins  # imported lazily, inside a function
    assert not any(pin.lower().startswith(("ray==", "spotburst==")) for pin in pins)
    assert pins == sorted(pins, key=str.lower)


def test_doll_runs_on_a_head_that_has_only_ray_and_results_come_back_in_its_log(
    bare_bin: Path, bare_address: str, tmp_path: Path
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
    out = run_workload(run, address=bare_address, out=tmp_path / "results", show=shown.append)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["target"] == f"address:{bare_address}"
    assert summary["trace"] == {"file": "flat.json", "zone": "lab-1a", "product": "Linux/UNIX"}
    assert summary["policies"]["on-demand"]["batches"] == 40
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["inputs"]["trace"]["sha256"] == sha256_of(trace)
    assert provenance["numpy"] == version("numpy")
    assert (out / "records" / "on-demand_timeline.jsonl").stat().st_size > 0
    assert any(line.startswith("[on-demand] done") for line in shown)  # the log streamed
    assert not any(line.startswith("@@spotburst-results@@") for line in shown)


def test_a_failing_job_reports_its_error(bare_address: str, tmp_path: Path) -> None:
    run = WorkloadRun(name="doll", module="workloads.doll", args=("--zone", "nowhere-1z"))
    shown: list[str] = []
    with pytest.raises(JobFailed, match="ended FAILED") as failed:
        run_workload(run, address=bare_address, out=tmp_path / "results", show=shown.append)
    assert "nowhere-1z" in failed.value.tail  # the cause: in the log shown and in the error
    assert any("nowhere-1z" in line for line in shown)
    assert not (tmp_path / "results").exists()
