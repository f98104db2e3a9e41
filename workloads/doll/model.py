"""A small numpy classifier (64 -> hidden tanh -> 10 softmax) whose weights travel as one
flat vector, so the parameter server averages and applies plain arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workloads.doll.data import CLASSES, FEATURES


@dataclass(frozen=True)
class Mlp:
    hidden: int = 32

    @property
    def shapes(self) -> list[tuple[int, ...]]:
        return [(FEATURES, self.hidden), (self.hidden,), (self.hidden, CLASSES), (CLASSES,)]

    @property
    def size(self) -> int:
        return sum(int(np.prod(shape)) for shape in self.shapes)

    def initial_weights(self, rng: np.random.Generator) -> np.ndarray:
        parts = []
        for shape in self.shapes:
            if len(shape) == 2:
                parts.append(rng.normal(0.0, 1.0 / np.sqrt(shape[0]), shape).ravel())
            else:
                parts.append(np.zeros(shape[0]))
        return np.concatenate(parts)

    def unpack(self, weights: np.ndarray) -> list[np.ndarray]:
        if weights.shape != (self.size,):
            raise ValueError(f"weights have shape {weights.shape}, expected ({self.size},)")
        parts, start = [], 0
        for shape in self.shapes:
            count = int(np.prod(shape))
            parts.append(weights[start : start + count].reshape(shape))
            start += count
        return parts

    def _forward(self, weights: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w1, b1, w2, b2 = self.unpack(weights)
        hidden = np.tanh(x @ w1 + b1)
        logits = hidden @ w2 + b2
        logits -= logits.max(axis=1, keepdims=True)
        probabilities = np.exp(logits)
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        return hidden, probabilities

    def loss_and_accuracy(
        self, weights: np.ndarray, x: np.ndarray, y: np.ndarray
    ) -> tuple[float, float]:
        _, probabilities = self._forward(weights, x)
        loss = float(-np.mean(np.log(probabilities[np.arange(len(y)), y] + 1e-12)))
        accuracy = float(np.mean(probabilities.argmax(axis=1) == y))
        return loss, accuracy

    def gradient(self, weights: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Gradient of the mean cross-entropy over the batch, as one flat vector."""
        w1, _, w2, _ = self.unpack(weights)
        hidden, probabilities = self._forward(weights, x)
        d_logits = probabilities
        d_logits[np.arange(len(y)), y] -= 1.0
        d_logits /= len(y)
        d_hidden = (d_logits @ w2.T) * (1.0 - hidden**2)
        return np.concatenate(
            [
                (x.T @ d_hidden).ravel(),
                d_hidden.sum(axis=0),
                (hidden.T @ d_logits).ravel(),
                d_logits.sum(axis=0),
            ]
        )
