"""Survivor mode (`--torchft`): a torchft training script, one replica group per worker, each
replica group a Ray actor of its own under this run's controller; torchft's Lighthouse (Ray's
own actor for it, on the driver's node) decides each step's quorum.

Why not Ray Train's replica groups (TorchftConfig): in Ray 2.60 its preemption watcher is off
for them, one group is replaced only at a fixed worker count and onto its old placement bundle
(the draining node, or a wait without end for a dead one), a group that leaves cleanly is never
replaced, `ray.train.report` is a barrier across every rank (the survivors stall at their
next report) and only group 0 checkpoints. Here:

- each replica group is an actor placed on a node of its own choosing (alive, not draining, a
  CPU free); it runs the script's training function with Ray Train's own `get_context()` and
  `report()` (a TrainFnUtils of this run's, the seam Ray Train's local mode uses): rank = the
  group's slot, world size = the slots; a report is the group's own, never a barrier;
- at a notice (Ray's drain of its node, or its node's instance metadata) the group leaves at
  its next report — after its step was committed, so the others never wait on it in an
  all-reduce — and its actor is removed; the other groups step on;
- when a node has room again, a new replica group starts there in the free slot; torchft's
  Manager hands it the current weights and optimizer state from a live peer (PGTransport);
- a report's checkpoint is kept from the first group that reports it for a step; when every
  group is lost at once, the new groups start from the newest one (`get_checkpoint()`).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from vocab.spot import CAPACITY_SPOT, LABEL_CAPACITY
from workloads.common import ray_private
from workloads.common.actors import start_actor
from workloads.common.spot_notice import NoticeError, NoticeWatcher, SpotNotice
from workloads.elastic.progress import PREFIX
from workloads.elastic.schedule import START, GroupView, Schedule, fire_if_due
from workloads.elastic.script import ShippedScript

POLL_S = 0.25
ROWS_FLUSH_S = 0.5
"""A group's step and report rows go to the ledger in batches at most this old: a report
every few milliseconds is not an actor call each, from every group."""
PROGRESS_EVERY_S = 2.0
FINISH_GRACE_S = 60.0
"""After the first group finished, how long the others may take to finish theirs."""
LIGHTHOUSE_KWARGS = {
    "bind": "[::]:0",  # a free port
    "min_replicas": 1,
    # a quorum forms without a group that is up but not yet asking (a new group importing
    # torch and building its model) after this long: the survivors do not wait for it
    "join_timeout_ms": 300,
    "quorum_tick_ms": 50,
    # a group gone (left, or its node killed) is out of the next quorum after this long
    "heartbeat_timeout_ms": 1500,
}
QUIET_ENV = {"RUST_LOG": "warn"}
"""torchft logs every quorum and commit at INFO (its Rust side by RUST_LOG, its Python side by
the `torchft` logger): warnings and errors only in the run's log."""


class ReplicaLeave(BaseException):
    """Raised from `ray.train.report` in a replica group that is to leave (a notice): the
    training function ends there, after its step was committed. A BaseException, so a script's
    `except Exception` does not swallow it."""


@dataclass(frozen=True, kw_only=True)
class ReplicaSettings(ShippedScript):
    """What the driver tells every replica group (travels with the actor)."""

    slots: int
    storage: str
    filesystem: Any
    experiment: str
    env: dict[str, str] = field(default_factory=dict)


def _report_step(metrics: dict[str, Any], reports: int) -> int:
    """A report's step index: the script's `step` (torchft's committed steps,
    `manager.current_step()`) less one, else the group's own count of reports."""
    step = metrics.get("step")
    if isinstance(step, int) and not isinstance(step, bool) and step > 0:
        return step - 1
    return reports


def _numbers(metrics: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in metrics.items()
            if isinstance(value, int | float) and not isinstance(value, bool)}


def _storage(settings: ReplicaSettings) -> tuple[Any, str]:
    import pyarrow.fs

    if settings.filesystem is not None:
        return settings.filesystem, settings.storage
    if "://" in settings.storage:
        filesystem, path = pyarrow.fs.FileSystem.from_uri(settings.storage)
        return filesystem, path
    return pyarrow.fs.LocalFileSystem(), settings.storage


def replica_fn_utils_class() -> type:
    """The TrainFnUtils of a replica group (made on first use: Ray Train's internals are
    imported on the workers only)."""
    base = ray_private.TrainFnUtils

    class ReplicaFnUtils(base):  # type: ignore[misc, valid-type]
        """`ray.train.get_context()`, `report()` and `get_checkpoint()` for one replica group:
        its slot is its rank, the slots are the world; its reports go to the run's ledger,
        a report's checkpoint to the run's storage (the first group's for a step)."""

        def __init__(self, group: ReplicaGroup, checkpoint: str | None) -> None:
            self.group = group
            self.settings = group.settings
            self.context = ray_private.LocalTrainContext(
                experiment_name=self.settings.experiment, world_size=self.settings.slots,
                world_rank=group.slot)
            self.checkpoint_path = checkpoint
            self.reports = 0

        def report(self, metrics: dict[str, Any], checkpoint: Any = None,
                   checkpoint_dir_name: str | None = None, *args: Any, **kwargs: Any) -> None:
            step = _report_step(metrics, self.reports)
            self.reports += 1
            path = None
            if checkpoint is not None and ray.get(
                    self.group.ledger.claim_checkpoint.remote(step)):
                path = self._persist(checkpoint, checkpoint_dir_name or f"checkpoint_{step:06d}")
            self.group.record("steps", {"step": step, "kind": "report",
                                        "world_size": self.settings.slots,
                                        **_numbers(metrics)}, batched=True)
            self.group.record("reports", {"index": self.reports, "steps_covered": step + 1,
                                          "checkpoint": path,
                                          "reason": "script" if path else None},
                              batched=path is None)
            if path is not None:
                self.group.ledger.committed.remote(path, _numbers(metrics))
            if self.group.leaving.is_set():
                raise ReplicaLeave(f"replica group {self.group.number} leaves after step {step}")

        def _persist(self, checkpoint: Any, name: str) -> str:
            import pyarrow.fs

            filesystem, root = _storage(self.settings)
            target = f"{root.rstrip('/')}/{name}"
            filesystem.create_dir(target, recursive=True)
            pyarrow.fs.copy_files(checkpoint.path, target,
                                  source_filesystem=checkpoint.filesystem,
                                  destination_filesystem=filesystem)
            return target

        def get_checkpoint(self) -> Any:
            if self.checkpoint_path is None:
                return None
            filesystem, _ = _storage(self.settings)
            from ray.train import Checkpoint

            return Checkpoint(self.checkpoint_path, filesystem)

        def get_all_reported_checkpoints(self, *args: Any, **kwargs: Any) -> list[Any]:
            return []

        def get_dataset_shard(self, dataset_info: Any) -> Any:
            raise NotImplementedError("--torchft runs take no Ray Datasets: read the data in "
                                      "the training function")

        def get_context(self) -> Any:
            return self.context

        def get_preemption_info(self) -> Any:
            return None

        def is_distributed(self) -> bool:
            return True

        def barrier(self) -> None:
            """Replica groups never wait for each other (torchft's quorum does)."""

        def broadcast_from_rank_zero(self, data: Any) -> Any:
            return data

    return ReplicaFnUtils


class ReplicaGroup:
    """One replica group: one worker, its own torch process group (a TCPStore of its own, the
    store torchft's Manager joins), the script's training function."""

    def __init__(self, settings: ReplicaSettings, slot: int, number: int,
                 lighthouse: str) -> None:
        self.settings, self.slot, self.number = settings, slot, number
        self.lighthouse = lighthouse
        self.ledger: Any = ray.get_actor(settings.ledger)
        self.node_id: str = ray.get_runtime_context().get_node_id()
        self.leaving = threading.Event()
        self._stop_watching = threading.Event()
        self._rows: dict[str, list[dict[str, Any]]] = {}
        self._flushed = time.monotonic()

    def node(self) -> str:
        return self.node_id

    def leave(self, source: str) -> None:
        """Leave at the next report (a notice came for this group's node)."""
        if not self.leaving.is_set():
            self.leaving.set()
            self.record("notices", {"node_id": self.node_id, "source": source})

    def record(self, record: str, row: dict[str, Any], batched: bool = False) -> None:
        """A row of this group's in the ledger; `batched` rows (steps, reports) go in batches
        at most ROWS_FLUSH_S old (any other row flushes them first)."""
        full = {"replica_group": self.number, "slot": self.slot, "attempt": self.number,
                "rank": 0, "t": time.time(), **row}
        if batched:
            self._rows.setdefault(record, []).append(full)
            if time.monotonic() - self._flushed < ROWS_FLUSH_S:
                return
        self.flush()
        if not batched:
            self.ledger.add.remote(record, full)

    def flush(self) -> None:
        for record, rows in self._rows.items():
            if rows:
                self.ledger.add_many.remote(record, rows)
        self._rows = {}
        self._flushed = time.monotonic()

    def run(self, config: dict[str, Any], checkpoint: str | None) -> str:
        """The script's training function, to its end ("finished") or to a notice ("left")."""
        import torch.distributed as dist
        from torch.distributed import TCPStore

        logging.getLogger("torchft").setLevel(logging.WARNING)

        host = ray.util.get_node_ip_address()
        store = TCPStore(host, 0, is_master=True, wait_for_workers=False)
        os.environ.update({"MASTER_ADDR": host, "MASTER_PORT": str(store.port),
                           "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
                           "LOCAL_WORLD_SIZE": "1", "TORCHFT_LIGHTHOUSE": self.lighthouse,
                           "REPLICA_GROUP_ID": str(self.slot)})
        if not dist.is_initialized():
            dist.init_process_group("gloo", store=dist.PrefixStore("default", store),
                                    rank=0, world_size=1)
        ray_private.set_train_fn_utils(replica_fn_utils_class()(self, checkpoint))
        self._watch_notice()
        self.record("workers", {"node_id": self.node_id, "host": socket.gethostname()})
        try:
            self.settings.run(config)
        except ReplicaLeave:
            return "left"
        finally:
            self._stop_watching.set()
            self.flush()
        return "finished"

    def _watch_notice(self) -> None:
        watcher = NoticeWatcher()
        try:
            notice = watcher.check()
        except NoticeError:
            notice = None  # no metadata service here (not a spot node): the thread tries on
        if notice is not None:
            self._noticed(notice)
        else:
            self._stop_watching = watcher.watch(self._noticed, poll_s=self.settings.notice_poll)

    def _noticed(self, notice: SpotNotice) -> None:
        self.leave("imds")


REPLICA_GROUP = ray.remote(ReplicaGroup)


def progress_line(progress: dict[str, Any], live: list[int]) -> str:
    """The run's newest step, the live groups that train (have stepped) and those still
    starting, the groups that left or were lost so far, the newest loss."""
    stepped = set(progress["stepped"])
    training = sum(1 for number in live if number in stepped)
    starting, gone = len(live) - training, progress["leaves"]
    loss = progress.get("loss")
    return (f"{PREFIX} step {progress['steps_done']} on {training} replica groups"
            + (f", {starting} starting" if starting else "")
            + (f", {gone} left or lost so far" if gone else "")
            + (f", loss {loss:.4f}" if isinstance(loss, float) else ""))


def replica_group_name(ledger: str, number: int) -> str:
    """A replica group's actor name (the run's ledger's, numbered)."""
    return f"{ledger}-replica-{number}"


def last_line(error: BaseException) -> str:
    """The line of a remote error that says what went wrong (its last), without colours."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return re.sub(r"\x1b\[[0-9;]*m", "", lines[-1] if lines else type(error).__name__)[:300]


@dataclass
class Live:
    """A replica group the controller started and has not seen end."""

    number: int
    slot: int
    node: str
    actor: Any
    ref: Any
    noticed: bool = False


@dataclass
class ReplicaController:
    """The run's controller in survivor mode (see the module's docstring): started groups, the
    notices it passes on, the replacements it starts, the schedule it announces."""

    settings: ReplicaSettings
    config: dict[str, Any]
    cpus: float
    max_failures: int
    schedule: Schedule
    ledger: Any
    say: Callable[[str], None]
    live: dict[int, Live] = field(default_factory=dict)
    started: int = 0
    generation: int = -1
    """Generations of groups: the first, then one more each time every group was lost."""
    failures: int = 0
    finished_at: float | None = None
    error: str | None = None
    first_seen: dict[str, float] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    """Nodes a group left at a notice: never placed on again (the node's own notice can reach
    its group before Ray's drain reaches the controller; a node lost is gone from Ray's
    table)."""
    lighthouse: Any = None
    _shown_at: float = 0.0
    _shown_step: int = -1

    def run(self) -> None:
        self.lighthouse = start_actor(ray_private.LighthouseServerActor, LIGHTHOUSE_KWARGS,
                                      options={"num_cpus": 0,
                                               "runtime_env": {"env_vars": self.settings.env},
                                               "scheduling_strategy":
                                               NodeAffinitySchedulingStrategy(
                                                   ray.get_runtime_context().get_node_id(),
                                                   soft=False)})
        address = ray.get(self.lighthouse.address.remote())
        try:
            while self._tick(address):
                time.sleep(POLL_S)
        finally:
            for group in list(self.live.values()):
                ray.kill(group.actor, no_restart=True)
            ray.kill(self.lighthouse, no_restart=True)

    def _tick(self, lighthouse: str) -> bool:
        """One round; False once the run is over."""
        self._collect()
        if self.error is not None:
            return False
        if self.finished_at is not None:
            self._stop_late_groups()
            if not self.live:
                return False
            if time.time() - self.finished_at > FINISH_GRACE_S:
                self.error = (f"{len(self.live)} replica groups did not finish within "
                              f"{FINISH_GRACE_S:g} s of the first")
                return False
            return True
        try:
            nodes = [n for n in ray.nodes() if n["Alive"]]
            draining = set(ray_private.draining_nodes())
        except ray.exceptions.RayError:  # the GCS busy (a loaded machine): next round
            return True
        now = time.time()
        for node in nodes:
            self.first_seen.setdefault(node["NodeID"], now)
        for group in self.live.values():
            if group.node in draining and not group.noticed:
                group.noticed = True
                group.actor.leave.remote("ray-drain")
        self._fill(nodes, draining, lighthouse)
        try:
            progress = ray.get(self.ledger.replica_progress.remote(), timeout=10)
        except ray.exceptions.RayError:  # the ledger busy (a loaded machine): next round
            return True
        self._show(progress)
        self._preempt(progress, nodes)
        return True

    def _stop_late_groups(self) -> None:
        """Once a group finished, the groups still starting (no step reported) are stopped:
        with no peer left to heal them they would train alone from their first step."""
        try:
            stepped = set(ray.get(self.ledger.replica_progress.remote(), timeout=10)["stepped"])
        except ray.exceptions.RayError:
            return
        for group in [g for g in self.live.values() if g.number not in stepped]:
            del self.live[group.number]
            ray.kill(group.actor, no_restart=True)
            self.ledger.add.remote("resizes", {
                "event": "leave", "replica_group": group.number, "slot": group.slot,
                "node_id": group.node, "t": time.time(), "cause": "late",
                "noticed": group.noticed, "error": None})
            self.say(f"{PREFIX} replica group {group.number} (slot {group.slot}) stopped: "
                     "the run finished while it started")

    def _collect(self) -> None:
        """The groups whose run ended: finished, left at a notice, lost with their node, or
        failed (the script's error: counted against --max-failures)."""
        if not self.live:
            return
        by_ref = {group.ref: group for group in self.live.values()}
        ended, _ = ray.wait(list(by_ref), num_returns=len(by_ref), timeout=0)
        for ref in ended:
            group = by_ref[ref]
            del self.live[group.number]
            error = None
            try:
                outcome = ray.get(ref)
            except (ray.exceptions.ActorDiedError,
                    ray.exceptions.ActorUnschedulableError) as died:  # its node gone
                outcome, error = "lost", last_line(died)
            except ray.exceptions.RayError as failed:
                outcome, error = "failed", last_line(failed)
            ray.kill(group.actor, no_restart=True)  # its Manager's heartbeat ends with it
            if outcome == "finished" and self.finished_at is None:
                self.finished_at = time.time()
            if outcome == "left":
                self.gone.add(group.node)  # its node was noticed: it does not come back
            if outcome != "finished":
                self.ledger.add.remote("resizes", {
                    "event": "leave", "replica_group": group.number, "slot": group.slot,
                    "node_id": group.node, "t": time.time(), "cause": outcome,
                    "noticed": group.noticed, "error": error})
                self.say(f"{PREFIX} replica group {group.number} (slot {group.slot}) "
                         f"{outcome}{f' ({error})' if error else ''}; "
                         f"{len(self.live)} groups train on")
            if outcome == "failed":
                self.failures += 1
                if self.failures > self.max_failures:
                    self.error = error

    def _fill(self, nodes: list[dict[str, Any]], draining: set[str], lighthouse: str) -> None:
        """Start a replica group in each free slot a node has room for."""
        used = {group.slot for group in self.live.values()}
        free = [slot for slot in range(self.settings.slots) if slot not in used]
        if not free:
            return
        room: list[str] = []
        for row in sorted(nodes, key=lambda n: self.first_seen[n["NodeID"]]):
            if row["NodeID"] in draining or row["NodeID"] in self.gone:
                continue
            hosted = sum(1 for group in self.live.values() if group.node == row["NodeID"])
            fits = int(row["Resources"].get("CPU", 0.0) // self.cpus) - hosted
            room += [str(row["NodeID"])] * max(0, fits)
        checkpoint = None
        if not self.live and room:
            self.generation += 1
            checkpoint = ray.get(self.ledger.latest_checkpoint.remote())
        for slot, node in zip(free, room, strict=False):
            number = self.started
            self.started += 1
            actor = start_actor(REPLICA_GROUP, self.settings, slot, number,
                                lighthouse, options={
                                    "num_cpus": self.cpus, "max_concurrency": 2,
                                    "name": replica_group_name(self.settings.ledger, number),
                                    "scheduling_strategy": NodeAffinitySchedulingStrategy(
                                        node, soft=False),
                                    "runtime_env": {"env_vars": self.settings.env}})
            ref: Any = actor.run.remote(self.config, checkpoint)
            self.live[number] = Live(number, slot, node, actor, ref)
            self.ledger.add.remote("resizes", {
                "event": "join", "replica_group": number, "slot": slot, "node_id": node,
                "t": time.time(), "node_seen": self.first_seen[node],
                "generation": self.generation, "resumed_from": checkpoint})
            self.say(f"{PREFIX} replica group {number} started in slot {slot} on node "
                     f"{node[:12]}" + (f", from checkpoint {checkpoint}" if checkpoint else ""))

    def _show(self, progress: dict[str, Any]) -> None:
        now = time.monotonic()
        if (now - self._shown_at < PROGRESS_EVERY_S or not progress["steps_done"]
                or progress["steps_done"] == self._shown_step):
            return
        self._shown_at, self._shown_step = now, progress["steps_done"]
        self.say(progress_line(progress, [g.number for g in self.live.values()]))

    def _preempt(self, progress: dict[str, Any], nodes: list[dict[str, Any]]) -> None:
        if self.schedule.pending is None:
            return
        groups = sorted((g for g in self.live.values() if not g.noticed), key=lambda g: g.slot)
        # a point waits for the previous one's group to be gone (or, for `start`, for a new
        # group to start): every point hits a different group, with or without a node back
        changes = progress["joins"] + (0 if self.schedule.pending.kind == START
                                       else progress["leaves"])
        view = GroupView(changes, [g.node for g in groups], progress["first_t"],
                         progress["last_t"], False, progress["steps_done"])
        spot = {n["NodeID"] for n in nodes
                if n.get("Labels", {}).get(LABEL_CAPACITY) == CAPACITY_SPOT}
        on_node = {group.node: group.number for group in groups}
        fire_if_due(self.schedule, view, progress["steps_done"], spot, time.time(),
                    lambda row: self.ledger.add.remote("schedule", row), self.say,
                    holder=lambda node: ("replica group", on_node[node]))
