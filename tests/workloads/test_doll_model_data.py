import numpy as np
import pytest

from workloads.common.spot_market.preemption import MarkovAvailability
from workloads.doll.data import FEATURES, distort, load_split, sample_stream
from workloads.doll.model import Mlp


def test_gradient_matches_finite_differences() -> None:
    model, rng = Mlp(hidden=8), np.random.default_rng(3)
    digits = load_split()
    weights = model.initial_weights(rng)
    x, y = sample_stream(digits, rng, 6)
    gradient = model.gradient(weights, x, y)
    for index in rng.choice(model.size, 12, replace=False):
        step = np.zeros(model.size)
        step[index] = 1e-6
        numeric = (
            model.loss_and_accuracy(weights + step, x, y)[0]
            - model.loss_and_accuracy(weights - step, x, y)[0]
        ) / 2e-6
        assert gradient[index] == pytest.approx(numeric, rel=1e-4, abs=1e-8)


def test_split_is_fixed_and_disjoint() -> None:
    first, second = load_split(), load_split()
    assert np.array_equal(first.test_y, second.test_y)
    train = {row.tobytes() for row in first.train_x}
    assert sum(row.tobytes() in train for row in first.test_x) < 5  # digits has a few twins
    assert len(first.test_y) == 539 and len(first.train_y) == 1258


def test_distortion_changes_every_image_but_keeps_it_recognisable() -> None:
    digits, rng = load_split(), np.random.default_rng(0)
    originals = digits.train_x[:200]
    distorted = distort(originals, rng)
    assert distorted.shape == (200, FEATURES)
    assert distorted.min() >= 0.0 and distorted.max() <= 1.0
    assert np.all(np.abs(distorted - originals).sum(axis=1) > 0.1)
    correlation = [np.corrcoef(a, b)[0, 1] for a, b in zip(originals, distorted, strict=True)]
    assert np.median(correlation) > 0.7


def test_sgd_on_the_stream_learns_the_held_out_digits() -> None:
    model, rng, digits = Mlp(), np.random.default_rng(1), load_split()
    weights = model.initial_weights(rng)
    for _ in range(150):
        weights -= 0.5 * model.gradient(weights, *sample_stream(digits, rng, 64))
    assert model.loss_and_accuracy(weights, digits.test_x, digits.test_y)[1] > 0.85


def test_markov_chain_is_up_a_fraction_alpha_and_depends_on_the_seed_only() -> None:
    chains = MarkovAvailability(workers=20, alpha=0.8, seed=5)
    ups = np.array([chains.step() for _ in range(5000)])
    assert ups.mean() == pytest.approx(0.8, abs=0.03)
    again = MarkovAvailability(workers=20, alpha=0.8, seed=5)
    assert np.array_equal(ups[:100], np.array([again.step() for _ in range(100)]))
    assert np.all(np.array([MarkovAvailability(3, 1.0, 0).step() for _ in range(1000)]))
