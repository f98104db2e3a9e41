"""What runs on every training worker.

`train_entry` is the function Ray Train runs: it loads the user's script from the shipped
files, calls its training function with the run's train_loop_config — exactly what Ray
Train itself would do — and around it keeps the run's side of the worker (`WorkerRun`):

- its node's spot notice: the instance metadata (IMDSv2 on EC2, the lab node's endpoint here,
  workloads/common/spot_notice.NoticeWatcher) polled in a thread, and Ray Train's own drain
  signal for the worker group;
- the ranks' agreement (one all-reduce) whether a notice came, whether the worker count is to
  change, or whether a periodic checkpoint is due: what `checkpoint_due()` answers after each
  step and ElasticLoop acts on;
- every step and every `ray.train.report` (with the checkpoint it carried) in the run's
  ledger, from every rank; after the report that follows a notice, the ranks end the group
  as soon as Ray Train has committed that checkpoint (`NoticeHandoff`: Ray Train restarts it
  on the nodes left at once, not at the node's deadline), else they hold; after a resize
  checkpoint they hold until Ray Train resizes the group: no step is computed that the
  restart would throw away;
- a notice that is there before the script's first step: the ranks end the group before
  running the script;
- Ray Train's log of a training function's error keeps every traceback but the
  NoticeHandoff's: the designed end of a group is no error to show (`HandoffLogFilter`).

`ReportHook` (a Ray Train context callback on each worker) sees every report the script
makes, so the script's own `ray.train.report(checkpoint=...)` is the checkpoint.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import ray
import ray.train
import ray.train.collective

from workloads.common import ray_private
from workloads.common.ray_private import TrainContextCallback
from workloads.common.spot_notice import NoticeError, NoticeWatcher, SpotNotice
from workloads.elastic.script import ShippedScript

RESIZE_HOLD_MARGIN_S = 10.0
NOTICE_TIMEOUT_S = 1.0
STEPS_FLUSH_S = 0.5
"""Step rows go to the ledger in batches at most this old (any other row flushes them
first): a step every few milliseconds is not an actor call each, on every rank."""

_current: WorkerRun | None = None


class NotInRun(RuntimeError):
    """checkpoint_due() or ElasticLoop used outside a training function run-elastic runs."""


class NoticeHandoff(BaseException):
    """Raised on every rank once a notice's checkpoint is committed (or before the first
    step: nothing to save): the group ends now and Ray Train restarts it on the nodes left,
    as a preemption (controller.NoticeAwareFailurePolicy). A BaseException, so a script's
    `except Exception` does not swallow it."""


def handed_off(error: BaseException) -> bool:
    """Whether a worker group's error is the ranks' NoticeHandoff (on every failed rank)."""
    failures = getattr(error, "worker_failures", None)
    if not failures:
        return False
    return all(isinstance(getattr(e, "_base_exc", e), NoticeHandoff) for e in failures.values())


class HandoffLogFilter(logging.Filter):
    """Drops the record Ray Train logs for a training function that ended with the ranks'
    NoticeHandoff ("Error in training function:" and its traceback, on every rank at every
    notice); a real error of the script keeps its full traceback. Ray Train logs it while
    it handles the error (it formats the traceback from `sys.exc_info()` there too), so the
    exception being handled is the training function's."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else sys.exc_info()[1]
        return not isinstance(error, NoticeHandoff)


TRAINING_ERROR_LOGGER = logging.getLogger(ray_private.training_error_logger_name())
"""The logger of Ray Train's training-function error (its traceback)."""


def quiet_handoffs() -> None:
    """Install HandoffLogFilter on this worker process (once)."""
    if not any(isinstance(f, HandoffLogFilter) for f in TRAINING_ERROR_LOGGER.filters):
        TRAINING_ERROR_LOGGER.addFilter(HandoffLogFilter())


@dataclass(frozen=True, kw_only=True)
class WorkerSettings(ShippedScript):
    """What the driver tells every worker about the run (travels with the entry function)."""

    checkpoint_every: int
    checkpoint_timeout: float
    on_notice: str
    cluster_rescale_timeout: float
    min_workers: int
    max_workers: int


def current() -> WorkerRun:
    """This worker's run (inside a training function run by `run-elastic`)."""
    if _current is None:
        raise NotInRun("checkpoint_due() and ElasticLoop work inside a training function run "
                       "by `invoke run-elastic` or `python -m workloads.elastic`")
    return _current


def train_entry(settings: WorkerSettings, config: dict[str, Any]) -> Any:
    """Ray Train's training function for the run: the script's own, around the run's side."""
    global _current
    quiet_handoffs()
    run = WorkerRun(settings)
    _current = run
    try:
        run.begin()
        if run.notice_before_first_step():
            raise NoticeHandoff(f"notice before group {run.attempt}'s first step")
        try:
            return settings.run(config)
        except Exception as error:
            run.hint(error)
            raise
    finally:
        run.stop()
        _current = None


class WorkerRun:
    def __init__(self, settings: WorkerSettings) -> None:
        context = ray.train.get_context()
        self.settings = settings
        self.rank: int = context.get_world_rank()
        self.world_size: int = context.get_world_size()
        self.node_id: str = ray.get_runtime_context().get_node_id()
        self.ledger: Any = ray.get_actor(settings.ledger)
        self.attempt = 0
        self.steps_done = 0
        """Steps of the run's lineage done: the restored checkpoint's, then this group's."""
        self.marks_steps = False
        """The script marks its steps (ElasticLoop, checkpoint_due); else a report is one."""
        self.reports = 0
        self._lock = threading.Lock()
        self._notice: SpotNotice | None = None
        self._noticed = False  # the ranks agreed on a notice
        self._room = False  # rank 0 saw the chosen worker count differ from this group's
        self._resized = False
        self._pending: str | None = None  # why the next report checkpoints
        self._stop = threading.Event()
        self._watcher = NoticeWatcher(timeout_s=NOTICE_TIMEOUT_S)
        self._stop_watching = threading.Event()
        self._steps: list[dict[str, Any]] = []
        self._steps_flushed = time.monotonic()

    # --- start and end ----------------------------------------------------------------------

    def begin(self) -> None:
        checkpoint = ray.train.get_checkpoint()
        path = checkpoint.path if checkpoint is not None else None
        begun = None
        if self.rank == 0:
            begun = ray.get(self.ledger.begin_attempt.remote(self.world_size, path))
        begun = ray.train.collective.broadcast_from_rank_zero(begun)
        self.attempt, self.steps_done = int(begun["attempt"]), int(begun["resumed_steps"])
        self._record("workers", {"node_id": self.node_id})
        try:  # a notice already there is known before the script's first step
            notice = self._watcher.check()
            if notice is not None:
                self._on_notice(notice)
        except NoticeError:
            pass  # no metadata service here (not a spot node): the thread keeps trying
        if self._notice is None:
            self._stop_watching = self._watcher.watch(self._on_notice,
                                                      poll_s=self.settings.notice_poll)
        elastic = self.settings.min_workers < self.settings.max_workers
        if self.rank == 0 and elastic and self.settings.on_notice == "checkpoint":
            threading.Thread(target=self._watch_capacity, name="capacity", daemon=True).start()

    def stop(self) -> None:
        self._flush_steps()
        self._stop.set()
        self._stop_watching.set()

    def notice_before_first_step(self) -> bool:
        """Whether the ranks agree a notice came before the script started (then nothing
        this group computes would survive: hold instead)."""
        source, _, _ = self._agreed_signals()
        if source is None or self.settings.on_notice != "checkpoint":
            return False
        self._noticed = True
        if self.rank == 0:
            self._record("notices", {"agreed": True, "source": source, "step": None,
                                     "before_first_step": True})
        return True

    # --- steps, the agreement, reports ------------------------------------------------------

    def mark_step(self, step: int | None = None, metrics: dict[str, Any] | None = None) -> int:
        """A step completed on this rank (numbered along the run's lineage); returns it."""
        index = self.steps_done if step is None else step
        self.steps_done = index + 1
        self.marks_steps = True
        self._record("steps", {"step": index, "kind": "step", "world_size": self.world_size,
                               **(metrics if metrics and self.rank == 0 else {})})
        return index

    def due(self, checkpoint_every: bool = True) -> str | None:
        """Why this step is to be checkpointed now, the same answer on every rank: `notice`,
        `resize`, `periodic` (every --checkpoint-every steps), or None."""
        source, room, _ = self._agreed_signals()
        reason = None
        if source is not None and not self._noticed:
            self._noticed = True
            if self.rank == 0:
                self._record("notices", {"agreed": True, "source": source,
                                         "step": self.steps_done - 1,
                                         "before_first_step": False})
            if self.settings.on_notice == "checkpoint":
                reason = "notice"
        if reason is None and room and not self._resized:
            self._resized = True
            reason = "resize"
        every = self.settings.checkpoint_every
        if reason is None and checkpoint_every and every and self.steps_done % every == 0:
            reason = "periodic"
        self._pending = reason
        return reason

    def expect_report(self, reason: str) -> None:
        """The next report checkpoints for `reason` (ElasticLoop's own decisions)."""
        self._pending = reason

    def reported(self, checkpoint_path: str | None) -> None:
        """The script reported (every rank does); `checkpoint_path` when this rank's report
        carried the checkpoint. After a notice or resize checkpoint the ranks hold."""
        self.reports += 1
        if not self.marks_steps:
            self._record("steps", {"step": self.steps_done, "kind": "report",
                                   "world_size": self.world_size})
            self.steps_done += 1
        reason, self._pending = self._pending, None
        self._record("reports", {"index": self.reports, "steps_covered": self.steps_done,
                                 "checkpoint": checkpoint_path,
                                 "reason": reason or ("script" if checkpoint_path else None)})
        if reason == "notice":
            if self._committed(checkpoint_path):
                raise NoticeHandoff(f"group {self.attempt}: step {self.steps_done - 1} "
                                    f"committed after a notice")
            self.hold("notice")
        elif reason == "resize":
            self.hold("resize")

    def _committed(self, checkpoint_path: str | None) -> bool:
        """The same answer on every rank: whether Ray Train committed the checkpoint rank 0
        just reported (rank 0 waits for it, up to --checkpoint-timeout)."""
        from ray.train import CheckpointConsistencyMode

        committed = False
        if self.rank == 0 and checkpoint_path:
            try:
                reported = ray.train.get_all_reported_checkpoints(
                    consistency_mode=CheckpointConsistencyMode.COMMITTED,
                    timeout_s=self.settings.checkpoint_timeout)
                committed = any(str(r.checkpoint.path) == checkpoint_path for r in reported)
            except Exception:  # the controller busy or gone: hold instead
                committed = False
        return self._all_ranks_max([1.0 if committed else 0.0])[0] > 0

    def hold(self, reason: str) -> None:
        """Compute nothing a restart would throw away: Ray Train ends this group at the node's
        deadline (or to resize it); if no end comes in time, training goes on."""
        limit = (self.settings.checkpoint_timeout if reason == "notice"
                 else self.settings.cluster_rescale_timeout + RESIZE_HOLD_MARGIN_S)
        step = self.steps_done - 1 if self.steps_done else None
        if self.rank == 0:
            self._record("holds", {"step": step, "reason": reason})
        threading.Event().wait(limit)  # the group's end comes first, from outside
        if self.rank == 0:
            self._record("holds", {"step": step, "reason": reason, "expired": True})

    def finish(self, metrics: dict[str, Any]) -> None:
        self._flush_steps()
        if self.rank == 0:
            ray.get(self.ledger.finish.remote(metrics))

    def set_total_steps(self, total: int) -> None:
        if self.rank == 0:
            self.ledger.set_total_steps.remote(total)

    def hint(self, error: BaseException) -> None:
        """Say what a known elastic pitfall looks like when the script fails with it."""
        text = str(error)
        hint = None
        if "state_dict" in text and '"module.' in text:
            hint = ("the checkpoint and the model disagree on DDP's 'module.' prefix: with 1 "
                    "worker prepare_model does not wrap the model, so a state_dict saved from "
                    "the wrapper does not load (save model.module.state_dict() when wrapped)")
        elif isinstance(error, AttributeError) and "'module'" in text:
            hint = ("model.module exists only when prepare_model wrapped the model (more than "
                    "1 worker): unwrap it only then")
        if hint:
            print(f"elastic: hint (group {self.attempt}, {self.world_size} workers): {hint}",
                  file=sys.stderr, flush=True)
            self._record("hints", {"error": type(error).__name__, "hint": hint})

    # --- notices and capacity ---------------------------------------------------------------

    def _on_notice(self, notice: SpotNotice) -> None:
        with self._lock:
            self._notice = notice
        self._record("notices", {"node_id": self.node_id, "source": "imds",
                                 "action": notice.action, "deadline": notice.time.timestamp()})

    def _agreed_signals(self) -> tuple[str | None, bool, bool]:
        """The same answer on every rank: whether any rank has a notice ('imds' for a node's
        metadata notice, 'ray-drain' for Ray Train's preemption signal, else None), whether
        rank 0 saw the worker count change, whether any rank is on a draining node."""
        drain = ray_private.get_train_context().preemption_context.preemption_info is not None
        with self._lock:
            flags = [float(self._notice is not None), float(self._room), float(drain)]
        flags = self._all_ranks_max(flags)
        source = "imds" if flags[0] else "ray-drain" if flags[2] else None
        return source, flags[1] > 0, flags[2] > 0

    def _all_ranks_max(self, values: list[float]) -> list[float]:
        """Each value's maximum over the ranks (one all-reduce), the same on every rank."""
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and self.world_size > 1:
            import torch
            from ray.train.torch import get_device

            agreed = torch.tensor(values, device=get_device())
            dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
            return [float(value) for value in agreed.tolist()]
        return values

    def _watch_capacity(self) -> None:
        """Rank 0: whether the scaling policy asked this group to resize (it then
        checkpoints and parks at its next step)."""
        while not self._stop.wait(self.settings.notice_poll):
            try:
                wanted = ray.get(self.ledger.resize_requested.remote(self.attempt), timeout=10)
            except Exception:  # a ledger hiccup: ask again at the next poll
                continue
            if wanted is not None:
                with self._lock:
                    self._room = True
                return

    def _record(self, record: str, row: dict[str, Any]) -> None:
        full = {"attempt": self.attempt, "rank": self.rank, "t": time.time(), **row}
        if record == "steps":
            self._steps.append(full)
            if time.monotonic() - self._steps_flushed >= STEPS_FLUSH_S:
                self._flush_steps()
            return
        self._flush_steps()
        self.ledger.add.remote(record, full)

    def _flush_steps(self) -> None:
        if self._steps:
            self.ledger.add_many.remote("steps", self._steps)
            self._steps = []
        self._steps_flushed = time.monotonic()


class ReportHook(TrainContextCallback):  # type: ignore[misc]
    """On every worker, around each `ray.train.report`: which report it was and whether this
    rank's carried the checkpoint (the run's record of the script's own checkpoints)."""

    @contextmanager
    def on_report(self) -> Iterator[None]:
        run = _current
        context = ray_private.get_train_context()
        before = context.checkpoint
        yield
        if run is None:
            return
        after = context.checkpoint
        run.reported(str(after.path) if after is not None and after is not before else None)
