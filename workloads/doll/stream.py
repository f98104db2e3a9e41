"""A stream worker's arrivals: how the lab's workers (worker.py) draw the gaps between the
points of each batch, and how the simulator (replay.py, `--arrivals exponential`) draws the
same gaps from the same seeds, so that a lab run and its simulation see one stream."""

from __future__ import annotations

import numpy as np


def worker_seed(run_seed: int, index: int) -> int:
    """The seed of worker `index`'s stream in a run seeded `run_seed`."""
    return run_seed * 1000 + index


def arrival_generator(seed: int) -> np.random.Generator:
    """The generator of one worker's gaps: apart from the one that draws its data, so its
    n-th batch takes the same time whatever data it drew before."""
    return np.random.default_rng((seed, 1))


def batch_arrivals(generator: np.random.Generator, rate: float, batch_size: int) -> np.ndarray:
    """Seconds from a batch's start to each of its points' arrival: exponential gaps of
    mean 1/λ."""
    return np.cumsum(generator.exponential(1.0 / rate, batch_size))
