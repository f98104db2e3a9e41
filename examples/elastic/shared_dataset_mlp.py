# mypy: disable-error-code="attr-defined"
"""A Ray Train V2 script that reads its dataset from the shared folder every node sees
(`$SPOTBURST_SHARED`: the stack's EFS file system on AWS, the lab's folder on a spot lab),
staged there once, instead of downloading it on every worker: a worker that Ray Train
starts on a replacement node after a preemption reads the same file at once.

    python examples/elastic/shared_dataset_mlp.py --write-dataset blobs.npz
    invoke data-put blobs.npz            # or: --stack dev

then give this file to run-elastic (`-f`, `--function train_func`); `--config
'{"dataset": "blobs.npz"}'` names the staged file. Checkpoints are the script's own,
reported every epoch, so a restart resumes from the last one (with `--checkpoint-to shared`
they too stay in the shared folder).
"""

import argparse
import os
import tempfile

import numpy as np
import ray.train
import ray.train.torch
import torch
from ray.train import Checkpoint
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

SHARED_ENV = "SPOTBURST_SHARED"


def write_dataset(path, samples=12000, features=32, classes=8, seed=0):
    """Points around `classes` Gaussian centers, as one .npz (points, labels)."""
    generator = np.random.default_rng(seed)
    centers = generator.normal(size=(classes, features))
    labels = generator.integers(0, classes, size=samples)
    points = centers[labels] + generator.normal(size=(samples, features)) * 1.5
    np.savez(path, points=points.astype(np.float32), labels=labels.astype(np.int64))


def load_dataset(name):
    """The staged dataset `name`, read from the shared folder (one clear error if absent)."""
    shared = os.environ.get(SHARED_ENV)
    if not shared:
        raise RuntimeError(f"{SHARED_ENV} is not set: this cluster has no shared folder")
    path = os.path.join(shared, name)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: stage it first with `invoke data-put {name}`")
    with np.load(path) as data:
        return TensorDataset(torch.from_numpy(data["points"]), torch.from_numpy(data["labels"]))


def train_func(config):
    dataset = load_dataset(config.get("dataset", "blobs.npz"))
    epochs = config.get("epochs", 8)
    points, labels = dataset.tensors
    model = nn.Sequential(nn.Linear(points.shape[1], 128), nn.ReLU(),
                          nn.Linear(128, int(labels.max()) + 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=config.get("lr", 0.05), momentum=0.9)
    start_epoch = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as folder:
            state = torch.load(os.path.join(folder, "checkpoint.pt"))
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"] + 1
    loader = ray.train.torch.prepare_data_loader(
        DataLoader(dataset, batch_size=config.get("batch_size", 64), shuffle=True))
    model = ray.train.torch.prepare_model(model)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(start_epoch, epochs):
        if ray.train.get_context().get_world_size() > 1:
            loader.sampler.set_epoch(epoch)
        for batch_points, batch_labels in loader:
            loss = loss_fn(model(batch_points), batch_labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with tempfile.TemporaryDirectory() as folder:
            saved = None
            if ray.train.get_context().get_world_rank() == 0:
                plain = model.module if isinstance(model, DistributedDataParallel) else model
                torch.save({"model": plain.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, os.path.join(folder, "checkpoint.pt"))
                saved = Checkpoint.from_directory(folder)
            ray.train.report({"loss": loss.item(), "epoch": epoch}, checkpoint=saved)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Write the example's dataset to stage.")
    parser.add_argument("--write-dataset", metavar="FILE", required=True,
                        help="write the dataset (.npz) here, then stage it with data-put")
    write_dataset(parser.parse_args().write_dataset)
