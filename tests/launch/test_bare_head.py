"""Dependencies reach the cluster: a Ray head started from a Python environment with ONLY
`ray[default]` at the pinned version runs DOLL through the real `--address` path to
completion, because the job's runtime_env pip-installs the workload's pinned imports.

Slow by nature (a venv with Ray, then numpy, scikit-learn, matplotlib and boto3 installed
into the job's environment by the head): minutes, not seconds."""

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

from launch.requirements import pinned_requirements
from launch.targets import PROJECT_DIR, run_workload
from launch.working_dir import CODE_PACKAGES
from launch.workload import WorkloadRun
from tests.helpers.processes import ray_head
from tests.launch.test_launch_address import TINY, one_price_trace

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


def test_doll_runs_on_a_head_that_has_only_ray(
    bare_bin: Path, bare_address: str, tmp_path: Path
) -> None:
    missing = subprocess.run(
        [str(bare_bin / "python"), "-c", "import numpy"], capture_output=True, text=True
    )
    assert "No module named 'numpy'" in missing.stderr  # the head's Python really is bare
    run = WorkloadRun(
        name="doll",
        module="workloads.doll",
        args=(*TINY, "--zone", "lab-1a", "--product", "Linux/UNIX"),
        inputs={"--trace": one_price_trace(tmp_path)},
    )
    shown: list[str] = []
    out = run_workload(run, address=bare_address, out=tmp_path / "results", show=shown.append)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["target"] == f"address:{bare_address}"
    assert summary["policies"]["on-demand"]["batches"] == 40
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["numpy"] == version("numpy")
