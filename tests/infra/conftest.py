"""The dev stack's real program, run once under Pulumi mocks for all infrastructure tests."""

from __future__ import annotations

import pytest

from launch.offline import OfflineRun, run_offline
from launch.stack_config import read_stack_config
from stacks.config import with_admin_cidr_placeholder


@pytest.fixture(scope="session")
def dev_config() -> dict[str, str]:
    """The shipped dev config with the documentation-range adminCidrs `invoke plan` uses (the
    shipped file alone is refused: tests/infra/test_deploy_guards.py)."""
    return with_admin_cidr_placeholder(read_stack_config("dev"))[0]


@pytest.fixture(scope="session")
def dev_run(dev_config: dict[str, str]) -> OfflineRun:
    return run_offline(dev_config, "dev")
