"""The digits CNN of digits_cnn.py for torchft: one replica group per worker; torchft's Manager
decides each step's quorum, so a group that leaves (a spot notice) or dies costs the others
nothing, and a new group gets the weights and optimizer state from a live peer. Each group
trains a batch of its own shard per step, reports every step (`step`: the Manager's committed
steps), checkpoints every --checkpoint-every steps (resumed once every group was lost):
    invoke run-elastic -f examples/elastic/torchft_digits.py --function train_func \
        --torchft --preempt-at 4s,4s -- --steps 600 --step-time 0.1
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import ray.train
import torch
import torch.nn.functional as F
from torch import nn
from torchft import DistributedDataParallel, DistributedSampler, Manager, Optimizer
from torchft.checkpointing.pg_transport import PGTransport
from torchft.process_group import ProcessGroupGloo


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="torchft_digits.py")
    parser.add_argument("--steps", type=int, default=300, help="committed optimizer steps")
    parser.add_argument("--batch", type=int, default=16, help="batch per replica group")
    parser.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    parser.add_argument("--step-time", type=float, default=0.0,
                        help="seconds a step of a bigger model takes (each group pads to it)")
    parser.add_argument("--checkpoint-every", type=int, default=50, help="steps")
    parser.add_argument("--seed", type=int, default=0, help="initial weights and data order")
    return parser.parse_args(argv)


def digits() -> tuple[torch.Tensor, ...]:
    """scikit-learn's bundled 8x8 digits, read from its data file, split 80/20."""
    spec = importlib.util.find_spec("sklearn")
    assert spec is not None and spec.origin is not None
    table = np.loadtxt(Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz",
                       delimiter=",", dtype=np.float32)
    images = torch.from_numpy(table[:, :-1] / 16.0).reshape(-1, 1, 8, 8)
    labels = torch.from_numpy(table[:, -1])
    order = torch.from_numpy(np.random.default_rng(0).permutation(len(labels)))
    test, train = order[:len(order) // 5], order[len(order) // 5:]
    return images[train], labels[train].long(), images[test], labels[test].long()


def train_func(config: dict[str, Any]) -> None:
    args = parse(sys.argv[1:])  # what follows `--` on run-elastic's command line
    context = ray.train.get_context()  # rank: this group's slot; world size: the slots
    x_train, y_train, x_test, y_test = digits()
    torch.manual_seed(args.seed)
    net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1),
                        nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 4 * 4, 10))
    inner = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)

    def state_dict() -> dict[str, Any]:
        return {"model": net.state_dict(), "optimizer": inner.state_dict()}

    def load_state_dict(state: dict[str, Any]) -> None:
        net.load_state_dict(state["model"])
        inner.load_state_dict(state["optimizer"])

    pg = ProcessGroupGloo(timeout=timedelta(seconds=30))
    manager = Manager(pg=pg, min_replica_size=1, load_state_dict=load_state_dict,
                      state_dict=state_dict, rank=0, world_size=1,
                      replica_id=f"digits_{context.get_world_rank()}",
                      timeout=timedelta(seconds=30),
                      checkpoint_transport=PGTransport(pg, timeout=timedelta(seconds=30),
                                                       device=torch.device("cpu")))
    checkpoint = ray.train.get_checkpoint()  # only after every group was lost
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            saved = torch.load(Path(folder) / "state.pt", weights_only=True)
        load_state_dict(saved)
        manager.load_state_dict(saved["manager"])
    model = DistributedDataParallel(manager, net)
    optimizer = Optimizer(manager, inner)
    sampler = DistributedSampler(range(len(y_train)), replica_rank=context.get_world_rank(),
                                 num_replica_groups=context.get_world_size(), group_rank=0,
                                 num_replicas=1, shuffle=True, seed=args.seed)
    batches: list[int] = []
    while manager.current_step() < args.steps:
        began = time.monotonic()
        if len(batches) < args.batch:
            sampler.set_epoch(manager.current_step())
            batches = list(sampler)
        index, batches = torch.tensor(batches[:args.batch]), batches[args.batch:]
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x_train[index]), y_train[index])
        loss.backward()
        time.sleep(max(0.0, args.step_time - (time.monotonic() - began)))
        optimizer.step()  # commits only if the quorum's all-reduce succeeded
        step = manager.current_step()
        if not manager.is_participating():  # healed in this step: the loss above is pre-heal
            with torch.no_grad():
                loss = F.cross_entropy(net(x_train[index]), y_train[index])
        metrics = {"step": step, "loss": loss.item(), "replica_groups": manager.num_participants()}
        if step % args.checkpoint_every == 0 or step >= args.steps:
            with torch.no_grad():
                logits = net(x_test)
            metrics |= {"accuracy": float((logits.argmax(1) == y_test).float().mean()),
                        "test_loss": F.cross_entropy(logits, y_test).item()}
            with tempfile.TemporaryDirectory() as folder:
                torch.save({**state_dict(), "manager": manager.state_dict()},
                           Path(folder) / "state.pt")
                ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(folder))
        else:
            ray.train.report(metrics)
    manager.shutdown()
