# mypy: disable-error-code="attr-defined"
"""examples/elastic/ray_train_mlp.py with the lines that make it lose no step at a spot
notice: after each optimizer step it asks `checkpoint_due()`; when a notice came, it reports
a checkpoint of that step through its own checkpoint code (the ranks then hold until Ray
Train restarts them from it), and a restart resumes after the share of the epoch the
checkpoint names (`at`, in epochs: the same batch at the same worker count, the same share
of the epoch's data at another).

    invoke run-elastic -f examples/elastic/ray_train_mlp_spot.py --function train_func
"""

import os
import tempfile

import ray.train
import ray.train.torch
import torch
from ray.train import Checkpoint, ScalingConfig
from ray.train.torch import TorchTrainer
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

from workloads.elastic import checkpoint_due


def synthetic_data(samples, features=64, classes=10, seed=0):
    """Points around ten fixed Gaussian cluster centers in `features` dimensions; `seed`
    draws the points (the same on every worker)."""
    centers = torch.randn(classes, features, generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (samples,), generator=generator)
    points = centers[labels] + torch.randn(samples, features, generator=generator) * 2.0
    return TensorDataset(points, labels)


def build_model(features=64, hidden=512, classes=10):
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for points, labels in loader:
            correct += (model(points).argmax(1) == labels).sum().item()
            total += len(labels)
    model.train()
    return correct / max(total, 1)


def save_and_report(model, optimizer, metrics, **position):
    """Rank 0 saves the model (unwrapped from DDP) and optimizer; every rank reports."""
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = None
        if ray.train.get_context().get_world_rank() == 0:
            plain = model.module if isinstance(model, DistributedDataParallel) else model
            torch.save({"model": plain.state_dict(), "optimizer": optimizer.state_dict(),
                        **position}, os.path.join(folder, "checkpoint.pt"))
            checkpoint = Checkpoint.from_directory(folder)
        ray.train.report(metrics, checkpoint=checkpoint)


def train_func(config):
    lr = config.get("lr", 0.02)
    epochs = config.get("epochs", 12)
    batch_size = config.get("batch_size", 64)
    samples = config.get("samples", 16000)

    train_loader = DataLoader(synthetic_data(samples), batch_size=batch_size, shuffle=True)
    test_loader = DataLoader(synthetic_data(2000, seed=1), batch_size=500)
    train_loader = ray.train.torch.prepare_data_loader(train_loader)
    test_loader = ray.train.torch.prepare_data_loader(test_loader)

    model = build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    start_epoch, skip = 0, 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as folder:
            state = torch.load(os.path.join(folder, "checkpoint.pt"))
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        done = state["at"] if "at" in state else state["epoch"] + 1  # epochs done
        start_epoch, skip = divmod(round(done * len(train_loader)), len(train_loader))
    model = ray.train.torch.prepare_model(model)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(start_epoch, epochs):
        if ray.train.get_context().get_world_size() > 1:
            train_loader.sampler.set_epoch(epoch)
        for batch, (points, labels) in enumerate(train_loader):
            if epoch == start_epoch and batch < skip:
                continue  # done before the restart
            loss = loss_fn(model(points), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if checkpoint_due():  # a spot notice: checkpoint this step now
                save_and_report(model, optimizer, {}, at=epoch + (batch + 1) / len(train_loader))
        metrics = {"loss": loss.item(), "accuracy": evaluate(model, test_loader),
                   "epoch": epoch}
        save_and_report(model, optimizer, metrics, epoch=epoch)


if __name__ == "__main__":
    trainer = TorchTrainer(
        train_func,
        train_loop_config={"lr": 0.02, "epochs": 12},
        scaling_config=ScalingConfig(num_workers=2),
    )
    result = trainer.fit()
    print(result.metrics)
