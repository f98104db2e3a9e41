"""Which job a free worker serves next: fair share (the coordinator's rule) or first come,
first served (the baseline the benchmark compares with). Pure: no Ray, no clock.

Fair share: every rebalance (5 s by default) each running job's cost per query (worker-seconds
per query over the last 30 s) sets its share of the workers, in proportion to the cost, i.e.
in inverse proportion to the query rate one worker reaches on it; a job with no measurement
yet gets the mean share. Shares are fractions of a pool of whole workers, so a free worker is
given by stride scheduling: each job has a pass that grows, per query dispatched, by the
worker-seconds the rebalance expects it to take divided by the job's share, and the job with
the lowest pass goes next. Every job so gets its share of worker time, and equal query rates
follow. Charging the rebalance's estimate rather than each sub-job's measured time keeps one
slow sub-job (a busy machine, a cold cache) from skewing the next seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

POLICIES = ("fair", "fcfs")


def free_places(held: Mapping[str, int], depth: int) -> list[str]:
    """The workers that can take a sub-job now, once per sub-job each can take, in the order
    to fill them: every worker its first before any its second, and so on up to `depth`
    (`held`: how many each holds now)."""
    return [worker for level in range(depth) for worker, count in held.items()
            if count <= level]


def fair_shares(costs: Mapping[str, float | None]) -> dict[str, float]:
    """Share of the workers per job (summing to 1), proportional to its cost per query."""
    if not costs:
        return {}
    known = [cost for cost in costs.values() if cost is not None and cost > 0]
    fallback = sum(known) / len(known) if known else 1.0
    weights = {job: cost if cost is not None and cost > 0 else fallback
               for job, cost in costs.items()}
    total = sum(weights.values())
    return {job: weight / total for job, weight in weights.items()}


@dataclass
class Scheduler:
    policy: str = "fair"
    shares: dict[str, float] = field(default_factory=dict)
    costs: dict[str, float] = field(default_factory=dict)
    """Worker-seconds per query each job is charged, as of the last rebalance."""
    measured: dict[str, float | None] = field(default_factory=dict)
    """Each running job's cost per query as last measured (None: not yet)."""
    passes: dict[str, float] = field(default_factory=dict)
    arrival: dict[str, int] = field(default_factory=dict)
    _arrivals: int = 0

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"--policy: expected one of {', '.join(POLICIES)}, "
                             f"got {self.policy!r}")

    def admit(self, job: str) -> None:
        """A job starts running: it joins at the lowest pass (no credit for time it waited)."""
        if job in self.passes:
            return
        self.passes[job] = min(self.passes.values(), default=0.0)
        self.arrival[job] = self._arrivals
        self._arrivals += 1
        self.measured[job] = None
        self._reprice()

    def leave(self, job: str) -> None:
        """The job stopped or finished; its share goes to the others."""
        for table in (self.passes, self.shares, self.costs, self.arrival, self.measured):
            table.pop(job, None)
        self._reprice()

    def rebalance(self, costs: Mapping[str, float | None]) -> dict[str, float]:
        """New shares from the running jobs' measured costs per query."""
        self.measured = {job: costs.get(job) for job in self.passes}
        self._reprice()
        return dict(self.shares)

    def _stride(self, job: str) -> float:
        """Pass added per query dispatched: the expected worker-seconds over the share."""
        return self.costs[job] / self.shares[job]

    def _reprice(self) -> None:
        """Costs and shares from `measured`. Each job's lead over the lowest pass is kept in
        queries, not in pass units: the units change with the prices (the first measurement
        turns a 1 s placeholder into a millisecond), and a lead charged at the old price
        would otherwise stall the other jobs for thousands of queries."""
        before = {job: self._stride(job) for job in self.passes
                  if job in self.costs and job in self.shares}
        known = [cost for cost in self.measured.values() if cost is not None and cost > 0]
        fallback = sum(known) / len(known) if known else 1.0
        self.costs = {job: cost if cost is not None and cost > 0 else fallback
                      for job, cost in self.measured.items()}
        self.shares = fair_shares(self.measured)
        if not self.passes:
            return
        base = min(self.passes.values())
        for job, stride in before.items():
            self.passes[job] = base + (self.passes[job] - base) * self._stride(job) / stride

    def pick(self, candidates: Sequence[str]) -> str | None:
        """The job a free worker serves next, among running jobs with sub-jobs waiting."""
        waiting = [job for job in candidates if job in self.passes]
        if not waiting:
            return None
        if self.policy == "fcfs":
            return min(waiting, key=lambda job: self.arrival[job])
        return min(waiting, key=lambda job: (self.passes[job], self.arrival[job]))

    def charge(self, job: str, queries: int) -> None:
        """`queries` of `job` were dispatched (negative: handed back, their worker died)."""
        if job in self.passes:
            self.passes[job] += queries * self._stride(job)
