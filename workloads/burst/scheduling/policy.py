"""The data-aware placement policy, pure (no Ray): learned per-node speed, earliest-finish
placement, a cap on tasks pending per node, one transfer at a time per node within a budget
of bytes staged ahead of its compute (its next task's data always moves), and at the tail
(every task placed) a node left with a free slot and nothing pending takes over the pending
task elsewhere that it would finish soonest before its node would: early placement commits
up to MAX_PENDING tasks per node on estimates, and the last ones are where a wrong estimate
leaves one site idle while the other still has a queue.

Speed learning (the reference): after each task, total_c = 0.2*total_c + c,
total_d = 0.2*total_d + compute_ms, speed = total_c / total_d (bytes per ms; transfer time
excluded), initially 1000. The transfer rate of a node that needs its data moved is learned
the same way from the transfers, so the finish estimate includes when the data can be there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DECAY = 0.2
INITIAL_SPEED = 1000.0  # bytes per ms
MAX_PENDING = 5
STAGE_AHEAD_BYTES = 1 << 30


@dataclass(frozen=True)
class Job:
    name: str
    complexity: float  # bytes


class DecayedRate:
    """amount / time with both totals decayed by DECAY before each new observation."""

    def __init__(self, initial: float | None) -> None:
        self.total_amount = 0.0
        self.total_time = 0.0
        self.initial = initial

    def observe(self, amount: float, duration: float) -> None:
        self.total_amount = DECAY * self.total_amount + amount
        self.total_time = DECAY * self.total_time + duration

    @property
    def value(self) -> float | None:
        if self.total_time <= 0:
            return self.initial
        return self.total_amount / self.total_time


@dataclass
class NodeModel:
    node_id: str
    slots: int
    needs_transfer: bool
    speed: DecayedRate = field(default_factory=lambda: DecayedRate(INITIAL_SPEED))
    transfer_rate: DecayedRate = field(default_factory=lambda: DecayedRate(None))  # bytes/s
    running: dict[str, tuple[float, Job]] = field(default_factory=dict)  # name -> (start, job)
    pending: list[Job] = field(default_factory=list)  # assigned, not yet computing, in order
    staged: set[str] = field(default_factory=set)  # pending jobs whose data is on the node
    moving: Job | None = None  # the job whose data is crossing the link now, if any
    transfer_started: float | None = None  # when that transfer began

    def seconds_for(self, job: Job) -> float:
        speed = self.speed.value or INITIAL_SPEED
        return job.complexity / speed / 1000.0

    def transfer_seconds(self, job: Job) -> float:
        rate = self.transfer_rate.value
        return 0.0 if rate is None or not self.needs_transfer else job.complexity / rate

    def estimated_finish(self, job: Job, now: float) -> float:
        """When `job` would finish here if assigned now, after everything already here."""
        return self._finishes([*self.pending, job], now)[-1]

    def queued_finishes(self, now: float) -> dict[str, float]:
        """When each pending job would finish here, in the order they are queued."""
        return dict(zip((job.name for job in self.pending),
                        self._finishes(self.pending, now), strict=True))

    def _finishes(self, queue: list[Job], now: float) -> list[float]:
        """Finish times of `queue` run in order: slots free up as running jobs end; data
        arrives one transfer after another."""
        free = sorted(
            max(now, start + self.seconds_for(running)) for start, running in self.running.values()
        )
        free += [now] * max(0, self.slots - len(free))
        transfer_free = now  # the link is busy until the transfer now moving ends
        if self.moving is not None and self.transfer_started is not None:
            transfer_free = max(now, self.transfer_started + self.transfer_seconds(self.moving))
        finishes = []
        for queued in queue:
            if queued.name in self.staged:
                ready = now
            elif queued is self.moving:
                ready = transfer_free
            else:
                transfer_free += self.transfer_seconds(queued)
                ready = transfer_free
            free.sort()
            free[0] = max(free[0], ready) + self.seconds_for(queued)
            finishes.append(free[0])
        return finishes

    def next_to_move(self, budget: float) -> Job | None:
        """The first pending job whose data is neither here nor moving here, if it fits the
        budget of bytes held ahead of compute here (staged or moving); the first such job
        moves whatever its size when nothing is held."""
        job = next((p for p in self.pending if p.name not in self.staged
                    and p is not self.moving), None)
        held = sum(p.complexity for p in self.pending
                   if p.name in self.staged and self.needs_transfer)
        if job is None or (held > 0 and held + job.complexity > budget):
            return None
        return job


class DataAwarePolicy:
    """Placement decisions and the per-node state they rest on."""

    def __init__(self, max_pending: int = MAX_PENDING,
                 stage_ahead_bytes: float = STAGE_AHEAD_BYTES) -> None:
        self.nodes: dict[str, NodeModel] = {}
        self.max_pending = max_pending
        self.stage_ahead_bytes = stage_ahead_bytes

    def add_node(self, node_id: str, slots: int, needs_transfer: bool) -> None:
        self.nodes[node_id] = NodeModel(node_id, slots, needs_transfer)

    def choose(self, job: Job, now: float) -> str | None:
        """The node with the earliest estimated finish among those under the pending cap;
        None when every node already holds `max_pending` pending jobs."""
        open_nodes = [
            n for n in self.nodes.values() if len(n.pending) < self.max_pending and n.slots > 0
        ]
        if not open_nodes:
            return None
        return min(open_nodes, key=lambda n: (n.estimated_finish(job, now), n.node_id)).node_id

    def assign(self, job: Job, node_id: str) -> None:
        node = self.nodes[node_id]
        node.pending.append(job)
        if not node.needs_transfer:
            node.staged.add(job.name)

    def take_over(self, node_id: str, now: float) -> tuple[Job, str] | None:
        """For a node with a free slot and nothing pending (call once every job is placed):
        the pending job elsewhere that would finish earliest before where it is now, moved
        here; returns it and the node it left, or None when no move finishes a job sooner.
        A job whose data is moving to its node may go too: the estimate counts the link as
        busy until that transfer ends, and the transfer, when done, stages nothing."""
        thief = self.nodes[node_id]
        if thief.pending or len(thief.running) >= thief.slots:
            return None
        best: tuple[float, NodeModel, Job] | None = None
        for victim in self.nodes.values():
            if victim is thief:
                continue
            finishes = victim.queued_finishes(now)
            for job in victim.pending:
                gain = finishes[job.name] - thief.estimated_finish(job, now)
                if gain > 0 and (best is None or gain > best[0]):
                    best = (gain, victim, job)
        if best is None:
            return None
        _, victim, job = best
        victim.pending.remove(job)
        victim.staged.discard(job.name)
        self.assign(job, node_id)
        return job, victim.node_id

    def next_transfer(self, node_id: str, now: float) -> Job | None:
        """The next pending job whose data must move to the node, if no transfer runs there
        now; marks it moving."""
        node = self.nodes[node_id]
        if node.moving is not None:
            return None
        job = node.next_to_move(self.stage_ahead_bytes)
        if job is not None:
            node.moving, node.transfer_started = job, now
        return job

    def transfer_done(self, node_id: str, job: Job, seconds: float) -> bool:
        """The job's data is on the node; False when another node took the job over
        meanwhile (the transfer is wasted: nothing is staged)."""
        node = self.nodes[node_id]
        node.moving = node.transfer_started = None
        if seconds > 0:
            node.transfer_rate.observe(job.complexity, seconds)
        if job not in node.pending:
            return False
        node.staged.add(job.name)
        return True

    def next_compute(self, node_id: str) -> Job | None:
        """The first pending job with its data on the node, if the node has a free slot."""
        node = self.nodes[node_id]
        if len(node.running) >= node.slots:
            return None
        return next((job for job in node.pending if job.name in node.staged), None)

    def started(self, node_id: str, job: Job, now: float) -> None:
        node = self.nodes[node_id]
        node.pending.remove(job)
        node.staged.discard(job.name)
        node.running[job.name] = (now, job)

    def finished(self, node_id: str, job: Job, compute_ms: float) -> None:
        node = self.nodes[node_id]
        node.running.pop(job.name, None)
        node.speed.observe(job.complexity, max(compute_ms, 1e-3))

    def remove_node(self, node_id: str) -> list[Job]:
        """Forget a lost node; returns its jobs (running first, then pending) to re-place."""
        node = self.nodes.pop(node_id, None)
        if node is None:
            return []
        return [job for _, job in node.running.values()] + list(node.pending)

    def speed(self, node_id: str) -> float:
        return self.nodes[node_id].speed.value or INITIAL_SPEED
