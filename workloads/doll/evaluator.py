"""The evaluator: held-out accuracy and loss of the weights it is sent."""

from __future__ import annotations

import numpy as np
import ray

from workloads.doll.data import load_split
from workloads.doll.model import Mlp


@ray.remote
class Evaluator:
    def __init__(self, hidden: int) -> None:
        self.model = Mlp(hidden)
        self.digits = load_split()
        self.rows: list[tuple[str, dict[str, float]]] = []

    async def evaluate(self, run: str, weights: np.ndarray, processed: int) -> dict[str, float]:
        loss, accuracy = self.model.loss_and_accuracy(
            weights, self.digits.test_x, self.digits.test_y
        )
        row = {"processed": processed, "accuracy": accuracy, "loss": loss}
        self.rows.append((run, row))
        return row

    async def take_rows(self, run: str) -> list[dict[str, float]]:
        """The evaluations of `run`, in order of processed batches (forgotten afterwards)."""
        mine = [row for tag, row in self.rows if tag == run]
        self.rows = [(tag, row) for tag, row in self.rows if tag != run]
        return sorted(mine, key=lambda row: row["processed"])
