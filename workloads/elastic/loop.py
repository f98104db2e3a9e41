"""What a training script uses inside `train_loop_per_worker(config)`: the whole contract.

    loop = ElasticLoop(config, total_steps=400)   # resumes from Ray Train's checkpoint
    if loop.state: model.load_state_dict(loop.state["model"])
    for step in loop.steps():                     # from the step after the checkpoint
        loss = train_one_step(...)
        loop.step_done(step, {"loss": loss}, lambda: {"model": model.state_dict()})
    loop.finish({"test_accuracy": accuracy})

`step_done` is where a spot notice reaches the job. Each worker watches its own node's
instance metadata (workloads/common/spot_notice.NoticeWatcher: the IMDSv2 notice on EC2, the
lab node's endpoint locally) and Ray Train's drain signal (`ray.train.get_preemption_info`,
which Ray raises when a node is drained for preemption, e.g. an evicted KubeRay pod). After
every step the ranks agree (one all-reduce) whether any of them has a notice; if so, rank 0
checkpoints *this* step at once and every rank holds: no further step is computed that a
restart would throw away. Ray Train then restarts the worker group on the nodes that are
left and it resumes from that checkpoint.

Resizing works the same way: rank 0 asks the run's ledger which worker count the seed's
rule picks for the capacity there is now (workloads/elastic/scaling.py: capacity that
returned, or a count measured as inefficient); once that differs from its own, every rank
checkpoints and holds, and Ray Train's scaling policy (workloads/elastic/policy.py, every
--cluster-rescale-timeout s) restarts the group at the new size from that checkpoint.
Steps, notices, checkpoints and holds go to the run's ledger (workloads/elastic/ledger.py),
from which the driver accounts for every step.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ray
import ray.train
import ray.train.collective

from workloads.common.spot_notice import NoticeError, NoticeWatcher, SpotNotice

SETTINGS_KEY = "spotburst_elastic"
"""The key of the launcher's settings in the script's `config`."""
STATE_FILE = "state.pt"
STEP_FILE = "step.json"
HOLD_POLL_S = 0.2
RESIZE_HOLD_MARGIN_S = 10.0


class ElasticLoop:
    def __init__(self, config: dict[str, Any], total_steps: int) -> None:
        import torch

        settings = config[SETTINGS_KEY]
        self.total_steps = int(total_steps)
        self.checkpoint_every = int(settings["checkpoint_every"])
        self.on_notice = str(settings["on_notice"])
        self.hold_s = float(settings["checkpoint_timeout"])
        self.resize_hold_s = float(settings["cluster_rescale_timeout"]) + RESIZE_HOLD_MARGIN_S
        self.elastic = int(settings["min_workers"]) < int(settings["max_workers"])
        self.worker_resources: dict[str, float] = dict(settings["resources_per_worker"])
        context = ray.train.get_context()
        self.rank = context.get_world_rank()
        self.world_size = context.get_world_size()
        self.node_id = ray.get_runtime_context().get_node_id()
        self.ledger: Any = ray.get_actor(settings["ledger"])
        self.state: dict[str, Any] | None = None
        resumed: int | None = None
        checkpoint = ray.train.get_checkpoint()
        if checkpoint is not None:
            with checkpoint.as_directory() as folder:
                resumed = int(json.loads((Path(folder) / STEP_FILE).read_text())["step"])
                # weights_only: tensors and plain containers, never arbitrary objects
                self.state = torch.load(Path(folder) / STATE_FILE, weights_only=True)
        self.start_step = 0 if resumed is None else resumed + 1
        attempt: int | None = None
        if self.rank == 0:
            begun: Any = ray.get(self.ledger.begin_attempt.remote(
                self.world_size, self.start_step, resumed, self.total_steps))
            attempt = int(begun)
        self.attempt: int = ray.train.collective.broadcast_from_rank_zero(attempt)
        self.ledger.worker.remote({"attempt": self.attempt, "rank": self.rank,
                                   "node_id": self.node_id, "t": time.time()})
        self._notice: SpotNotice | None = None
        self._noticed: bool = False
        self._lock: threading.Lock = threading.Lock()
        self._errors: int = 0
        self._room: bool = False
        self._resized: bool = False
        poll_s = float(settings["notice_poll"])
        self._stop_watching: threading.Event = NoticeWatcher(timeout_s=1.0).watch(
            self._on_notice, poll_s=poll_s, on_error=self._on_error)
        # The resize handshake (checkpoint and park before Ray Train resizes) fires when the
        # count changes without a notice (a node joins or dies); it stays off when notices are
        # ignored: restart-based tools resize from their last periodic checkpoint.
        if self.rank == 0 and self.elastic and self.on_notice == "checkpoint":
            threading.Thread(target=self._watch_capacity, args=(poll_s,), name="capacity",
                             daemon=True).start()

    # --- the script's side ------------------------------------------------------------------

    def steps(self) -> Iterator[int]:
        """The steps still to do: from the one after the restored checkpoint to the end."""
        return iter(range(self.start_step, self.total_steps))

    def step_done(self, step: int, metrics: dict[str, float],
                  state: Callable[[], dict[str, Any]]) -> None:
        """Record a completed step; checkpoint `state()` (called on rank 0 only) when a
        notice came (then hold until the restart), every `--checkpoint-every` steps, and
        after the last step."""
        now = time.time()
        if self.rank == 0:
            self.ledger.step.remote({"attempt": self.attempt, "step": step, "t": now,
                                     "world_size": self.world_size, **metrics})
        source, room = self._agreed_signals()
        reason = None
        if source is not None and not self._noticed:
            self._noticed = True
            if self.rank == 0:
                self.ledger.notice.remote({"attempt": self.attempt, "rank": 0, "agreed": True,
                                           "source": source, "step": step, "t": time.time()})
            if self.on_notice == "checkpoint":
                reason = "notice"
        if reason is None and room and not self._resized and step + 1 < self.total_steps:
            self._resized = True
            reason = "resize"
        if reason is None and self.checkpoint_every and (step + 1) % self.checkpoint_every == 0:
            reason = "periodic"
        if reason is None and step + 1 == self.total_steps:
            reason = "final"
        if reason is not None:
            self._save(step, metrics, state, reason)
        if reason == "notice" and step + 1 < self.total_steps:  # after the last: just end
            self._hold(step, self.hold_s, reason)
        elif reason == "resize":
            self._hold(step, self.resize_hold_s, reason)

    def finish(self, metrics: dict[str, Any]) -> None:
        """The run's final metrics (from rank 0), then stop watching for notices."""
        if self.rank == 0:
            ray.get(self.ledger.finish.remote(metrics))
        self._stop_watching.set()

    # --- notices ----------------------------------------------------------------------------

    def _on_notice(self, notice: SpotNotice) -> None:
        with self._lock:
            self._notice = notice
        self.ledger.notice.remote({"attempt": self.attempt, "rank": self.rank,
                                   "node_id": self.node_id, "source": "imds",
                                   "action": notice.action, "t": time.time(),
                                   "deadline": notice.time.timestamp()})

    def _on_error(self, error: NoticeError) -> None:
        self._errors += 1  # no metadata service here (not a spot node): nothing to watch

    def _agreed_signals(self) -> tuple[str | None, bool]:
        """The same answer on every rank: whether any rank has a notice ('imds' for a
        node's metadata notice, 'ray-drain' for Ray's preemption drain, else None), and
        whether rank 0 saw the run's worker count change."""
        import torch
        import torch.distributed as dist

        with self._lock:
            flags = [1.0 if self._notice is not None else 0.0, 1.0 if self._room else 0.0]
        if dist.is_available() and dist.is_initialized() and self.world_size > 1:
            # not `import ray.train.torch` here: that makes `ray` local to this function,
            # unbound below when a single worker skips this branch
            from ray.train.torch import get_device

            agreed = torch.tensor(flags, device=get_device())
            dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
            flags = [float(value) for value in agreed.tolist()]
        room = flags[1] > 0
        if flags[0] > 0:
            return "imds", room
        drain = ray.train.get_preemption_info() is not None
        return ("ray-drain" if drain else None), room

    # --- capacity (rank 0) ------------------------------------------------------------------

    def _watch_capacity(self, poll_s: float) -> None:
        while not self._stop_watching.wait(poll_s):
            try:
                # a draining node still counts: its ranks get the notice, whose checkpoint
                # must not lose a race with this one to be labelled a resize
                fits = workers_that_fit(self.worker_resources, count_draining=True)
                chosen = int(ray.get(self.ledger.choose_workers.remote(fits), timeout=10))
            except Exception:  # a GCS or ledger hiccup: ask again at the next poll
                continue
            if chosen != self.world_size:
                with self._lock:
                    self._room = True
                return

    # --- checkpoints and the hold -----------------------------------------------------------

    def _save(self, step: int, metrics: dict[str, float], state: Callable[[], dict[str, Any]],
              reason: str) -> None:
        import torch

        begin = time.time()
        report = {**metrics, "step": step}
        if self.rank == 0:
            with tempfile.TemporaryDirectory(prefix="spotburst-ckpt-") as folder:
                torch.save(state(), Path(folder) / STATE_FILE)
                (Path(folder) / STEP_FILE).write_text(json.dumps({"step": step}))
                ray.train.report(report, checkpoint=ray.train.Checkpoint.from_directory(folder))
            self.ledger.checkpoint.remote({"attempt": self.attempt, "step": step,
                                           "reason": reason, "t_begin": begin,
                                           "t": time.time()})
        else:
            ray.train.report(report)

    def _hold(self, step: int, limit_s: float, reason: str) -> None:
        """After a notice (or resize) checkpoint: compute nothing a restart would throw away.
        Ray Train ends this worker group when the node goes (its deadline), or to resize; if
        no restart comes within `limit_s`, training goes on from here."""
        begin = time.time()
        if self.rank == 0:
            self.ledger.hold.remote({"attempt": self.attempt, "step": step, "t": begin,
                                     "reason": reason})
        while time.time() < begin + limit_s:
            time.sleep(HOLD_POLL_S)
        if self.rank == 0:
            self.ledger.hold.remote({"attempt": self.attempt, "step": step, "t": time.time(),
                                     "reason": reason, "expired": True})


def workers_that_fit(resources_per_worker: dict[str, float], count_draining: bool = False) -> int:
    """How many workers the alive nodes (and, unless `count_draining`, not draining) hold,
    by their total resources (one job per cluster, as Ray Train's elastic policy assumes)."""
    from ray._private.state import state

    draining = set() if count_draining else set(state.get_draining_nodes())
    count = 0
    for node in ray.nodes():
        if not node["Alive"] or node["NodeID"] in draining:
            continue
        total = node["Resources"]
        count += int(min(total.get(name, 0.0) // need
                         for name, need in resources_per_worker.items() if need > 0))
    return count
