"""`invoke up`'s process never imports the offline runner (its gate plans in a subprocess):
Pulumi stays unpatched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECK = """
import sys
from pulumi.runtime import rpc
original = rpc.deserialize_resource
import tasks, launch.account.deploy_gate, launch.account.budget, launch.stack_config
launch.stack_config.read_stack_config("dev")
loaded = "launch.offline" in sys.modules
import launch.offline  # importing the offline runner patches nothing either
print(loaded, rpc.deserialize_resource is original)
"""


@pytest.mark.subprocess
def test_reading_stack_config_neither_imports_the_offline_runner_nor_patches_pulumi() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-800:]
    assert done.stdout.split() == ["False", "True"]
