"""The data stream: scikit-learn's handwritten digits (shipped with scikit-learn, no
download), split once into a training pool and a held-out test set, and streamed endlessly
with random affine distortions in the spirit of InfiMNIST."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.datasets import load_digits

IMAGE_SIDE = 8
FEATURES = IMAGE_SIDE * IMAGE_SIDE
CLASSES = 10
MAX_ROTATION_RAD = np.deg2rad(12.0)
SCALE_RANGE = (0.9, 1.1)
MAX_SHIFT_PX = 0.8
NOISE_STD = 0.03


@dataclass(frozen=True)
class Digits:
    train_x: np.ndarray  # (n, 64) in [0, 1]
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray


def load_split(test_fraction: float = 0.3, split_seed: int = 0) -> Digits:
    """The same split on every machine: it depends on `split_seed` only."""
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(split_seed).permutation(len(y))
    n_test = int(len(y) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    pixels = x.astype(np.float64) / 16.0
    return Digits(pixels[train], y[train], pixels[test], y[test])


def distort(images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Apply one random rotation/scale/shift per image (bilinear, zero outside) plus noise."""
    count = len(images)
    grid = images.reshape(count, IMAGE_SIDE, IMAGE_SIDE)
    angle = rng.uniform(-MAX_ROTATION_RAD, MAX_ROTATION_RAD, count)
    scale = rng.uniform(*SCALE_RANGE, count)
    shift = rng.uniform(-MAX_SHIFT_PX, MAX_SHIFT_PX, (count, 2))
    centre = (IMAGE_SIDE - 1) / 2
    rows, cols = np.meshgrid(np.arange(IMAGE_SIDE), np.arange(IMAGE_SIDE), indexing="ij")
    dr = rows[None] - centre - shift[:, 0, None, None]
    dc = cols[None] - centre - shift[:, 1, None, None]
    cos, sin = (np.cos(angle) / scale)[:, None, None], (np.sin(angle) / scale)[:, None, None]
    src_r = cos * dr - sin * dc + centre
    src_c = sin * dr + cos * dc + centre
    r0, c0 = np.floor(src_r).astype(int), np.floor(src_c).astype(int)
    fr, fc = src_r - r0, src_c - c0
    index = np.arange(count)[:, None, None]

    def pixel(r: np.ndarray, c: np.ndarray) -> np.ndarray:
        inside = (r >= 0) & (r < IMAGE_SIDE) & (c >= 0) & (c < IMAGE_SIDE)
        values = grid[index, np.clip(r, 0, IMAGE_SIDE - 1), np.clip(c, 0, IMAGE_SIDE - 1)]
        return np.where(inside, values, 0.0)

    warped = (
        pixel(r0, c0) * (1 - fr) * (1 - fc)
        + pixel(r0, c0 + 1) * (1 - fr) * fc
        + pixel(r0 + 1, c0) * fr * (1 - fc)
        + pixel(r0 + 1, c0 + 1) * fr * fc
    )
    noisy = warped + rng.normal(0.0, NOISE_STD, warped.shape)
    return np.clip(noisy, 0.0, 1.0).reshape(count, FEATURES)


def sample_stream(
    digits: Digits, rng: np.random.Generator, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """`count` fresh training points: random digits from the pool, each newly distorted."""
    chosen = rng.integers(0, len(digits.train_y), count)
    return distort(digits.train_x[chosen], rng), digits.train_y[chosen]
