"""Offline runs of the stack program cached per config for the whole process: the security
policy's tests read them many times, and mutation testing forks one test run per planted bug
from a process that already holds them."""

from __future__ import annotations

import functools

from launch.offline import OfflineRun, run_offline
from launch.stack_config import read_stack_config
from stacks.config import with_admin_cidr_placeholder


@functools.cache
def _run(config: tuple[tuple[str, str], ...], stack: str) -> OfflineRun:
    return run_offline(dict(config), stack)


def cached_run(overrides: dict[str, str] | None = None, stack: str = "dev") -> OfflineRun:
    """The stack's config from Pulumi.<stack>.yaml (empty adminCidrs planned with the
    documentation-range placeholder, as `invoke plan` does) with `overrides`, run offline once."""
    shipped, _ = with_admin_cidr_placeholder(read_stack_config(stack))
    config = {**shipped, **(overrides or {})}
    return _run(tuple(sorted(config.items())), stack)
