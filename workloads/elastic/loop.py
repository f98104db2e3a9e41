"""ElasticLoop: for a script that wants its data indexed by step, the same across worker
counts (a fixed global batch per step, split by rank), and its state saved for it.

    loop = ElasticLoop(total_steps=400)           # resumes from Ray Train's checkpoint
    if loop.state: model.load_state_dict(loop.state["model"])
    for step in loop.steps():                     # from the step after the checkpoint
        loss = train_one_step(...)
        loop.step_done(step, {"loss": loss}, lambda: {"model": model.state_dict()})
    loop.finish({"test_accuracy": accuracy})

After every step the ranks agree (workloads/elastic/worker.py) whether a spot notice came or
the worker count is to change; if so, rank 0 checkpoints *this* step at once through
`ray.train.report` and every rank holds until Ray Train restarts the group on the nodes
left, which resumes from that checkpoint. Scripts that keep their own checkpoint code use
`workloads.elastic.checkpoint_due()` instead.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ray.train

from workloads.elastic.worker import current

STATE_FILE = "state.pt"
STEP_FILE = "step.json"


class ElasticLoop:
    def __init__(self, total_steps: int) -> None:
        import torch

        self.run = current()
        self.total_steps = int(total_steps)
        self.run.set_total_steps(self.total_steps)
        self.rank, self.world_size = self.run.rank, self.run.world_size
        self.state: dict[str, Any] | None = None
        resumed: int | None = None
        checkpoint = ray.train.get_checkpoint()
        if checkpoint is not None:
            with checkpoint.as_directory() as folder:
                resumed = int(json.loads((Path(folder) / STEP_FILE).read_text())["step"])
                # weights_only: tensors and plain containers, never arbitrary objects
                self.state = torch.load(Path(folder) / STATE_FILE, weights_only=True)
        self.start_step = 0 if resumed is None else resumed + 1

    def steps(self) -> Iterator[int]:
        """The steps still to do: from the one after the restored checkpoint to the end."""
        return iter(range(self.start_step, self.total_steps))

    def step_done(self, step: int, metrics: dict[str, float],
                  state: Callable[[], dict[str, Any]]) -> None:
        """Record a completed step; checkpoint `state()` (called on rank 0 only) when a
        notice came (then hold until the restart), when the worker count is to change, every
        `--checkpoint-every` steps, and after the last step."""
        self.run.mark_step(step, metrics)
        reason = self.run.due()
        if step + 1 == self.total_steps:
            reason = "final"  # a notice after the last step: the run just ends
        if reason is not None:
            self.run.expect_report(reason)
            self._save(step, metrics, state)

    def finish(self, metrics: dict[str, Any]) -> None:
        """The run's final metrics (from rank 0)."""
        self.run.finish(metrics)

    def _save(self, step: int, metrics: dict[str, float],
              state: Callable[[], dict[str, Any]]) -> None:
        import torch

        report = {**metrics, "step": step}
        if self.rank != 0:
            ray.train.report(report)
            return
        with tempfile.TemporaryDirectory(prefix="spotburst-ckpt-") as folder:
            torch.save(state(), Path(folder) / STATE_FILE)
            (Path(folder) / STEP_FILE).write_text(json.dumps({"step": step}))
            ray.train.report(report, checkpoint=ray.train.Checkpoint.from_directory(folder))
