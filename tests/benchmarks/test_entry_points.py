"""The benchmarks run from the project's environment, from any directory, as modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.subprocess
@pytest.mark.parametrize("name", ["burst_speedup", "doll_cost", "doll_cbl_check",
                                  "doll_sim_agreement", "doll_sim_speed", "elastic_preemption",
                                  "rl_scaling"])
def test_a_benchmark_runs_as_a_module_from_anywhere(name: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", "--help"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-800:]
    assert done.stdout.startswith(f"usage: python -m benchmarks.{name}")
