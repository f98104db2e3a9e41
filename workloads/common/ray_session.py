"""Connecting to Ray: inside a Ray Job `ray.init()` joins the job's cluster by itself
(RAY_ADDRESS is set); anywhere else it starts a local Ray that ends with the process."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ray


@contextmanager
def ray_session(runtime_env: dict[str, Any] | None = None) -> Iterator[None]:
    """`runtime_env` (optional) applies to every task and actor of this driver."""
    ray.init(logging_level=logging.WARNING, configure_logging=True, runtime_env=runtime_env)
    try:
        yield
    finally:
        ray.shutdown()
