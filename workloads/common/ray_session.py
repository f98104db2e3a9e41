"""Connecting to Ray: inside a Ray Job `ray.init()` joins the job's cluster by itself
(RAY_ADDRESS is set); anywhere else it starts a local Ray that ends with the process."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import ray


@contextmanager
def ray_session() -> Iterator[None]:
    ray.init(logging_level=logging.WARNING, configure_logging=True)
    try:
        yield
    finally:
        ray.shutdown()
