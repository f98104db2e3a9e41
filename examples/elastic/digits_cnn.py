"""A small CNN on scikit-learn's bundled digits (1,797 8x8 images), data-parallel with torch
DDP (gloo on CPU, NCCL with GPUs), elastic and spot-safe through spotburst's ElasticLoop: the
default script of `invoke run-elastic`.

    invoke run-elastic -- --steps 600 --step-time 0.4

Each step takes one global batch of --batch images, the same whatever the worker count (a
rank takes every world_size-th image of it), so a run that shrinks or grows trains on the
same data in the same order.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray.train
import ray.train.torch
import torch
import torch.nn.functional as F
from torch import nn

from workloads.elastic.loop import ElasticLoop


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="digits_cnn.py")
    parser.add_argument("--steps", type=int, default=500, help="optimizer steps")
    parser.add_argument("--batch", type=int, default=64, help="global batch size")
    parser.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    parser.add_argument("--eval-every", type=int, default=50, help="steps between test evals")
    parser.add_argument("--step-time", type=float, default=0.3,
                        help="seconds a step of a bigger model takes on one worker: each of "
                             "W workers pads its share of the step to step-time / W")
    parser.add_argument("--seed", type=int, default=0, help="data split and initial weights")
    return parser.parse_args(argv)


class DigitsCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.head = nn.Linear(32 * 4 * 4, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        hidden = F.relu(self.conv1(images))
        hidden = F.max_pool2d(F.relu(self.conv2(hidden)), 2)
        return self.head(hidden.flatten(1))


def digits(seed: int) -> tuple[torch.Tensor, ...]:
    """scikit-learn's bundled 8x8 digits, read from its data file (importing scikit-learn
    would cost each worker seconds at every restart), split 80/20, seeded."""
    spec = importlib.util.find_spec("sklearn")  # found, not imported
    assert spec is not None and spec.origin is not None
    table = np.loadtxt(Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz",
                       delimiter=",", dtype=np.float32)
    images = (table[:, :-1] / 16.0).reshape(-1, 1, 8, 8)
    labels = table[:, -1].astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    test, train = order[:len(order) // 5], order[len(order) // 5:]
    return (torch.from_numpy(images[train]), torch.from_numpy(labels[train]),
            torch.from_numpy(images[test]), torch.from_numpy(labels[test]))


def global_batch(step: int, size: int, count: int, seed: int) -> np.ndarray:
    """The indices of step `step`'s batch: a fresh permutation per epoch, seeded."""
    per_epoch = count // size
    epoch, offset = divmod(step, per_epoch)
    order = np.random.default_rng([seed, epoch]).permutation(count)
    return order[offset * size:(offset + 1) * size]


def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    with torch.no_grad():
        return float((model(images).argmax(1) == labels).float().mean())


def train_loop_per_worker(config: dict[str, Any]) -> None:
    args = parse(sys.argv[1:])  # what follows `--` on run-elastic's command line
    loop = ElasticLoop(total_steps=args.steps)
    torch.manual_seed(args.seed)
    x_train, y_train, x_test, y_test = digits(args.seed)
    net = DigitsCNN()
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    if loop.state is not None:
        net.load_state_dict(loop.state["model"])
        optimizer.load_state_dict(loop.state["optimizer"])
    model = ray.train.torch.prepare_model(net)
    device = ray.train.torch.get_device()
    rank, world = loop.rank, loop.world_size
    for step in loop.steps():
        began = time.monotonic()
        batch = global_batch(step, args.batch, len(x_train), args.seed)[rank::world]
        images, labels = x_train[batch].to(device), y_train[batch].to(device)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        metrics = {"loss": loss.item()}
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            metrics["test_accuracy"] = accuracy(net, x_test.to(device), y_test.to(device))
        time.sleep(max(0.0, args.step_time / world - (time.monotonic() - began)))
        loop.step_done(step, metrics, lambda: {"model": net.state_dict(),
                                               "optimizer": optimizer.state_dict()})
    loop.finish({"test_accuracy": accuracy(net, x_test.to(device), y_test.to(device))})
