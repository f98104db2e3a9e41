"""The dev stack's real program, run once under Pulumi mocks for all infrastructure tests."""

from __future__ import annotations

import pytest

from launch.offline import OfflineRun, run_offline
from launch.stack_config import read_stack_config


@pytest.fixture(scope="session")
def dev_config() -> dict[str, str]:
    return read_stack_config("dev")


@pytest.fixture(scope="session")
def dev_run(dev_config: dict[str, str]) -> OfflineRun:
    return run_offline(dev_config, "dev")
