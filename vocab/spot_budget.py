"""The one timing budget of a spot interruption: from the two-minute notice to the instance's
end, who gets how long. Pure arithmetic, shared by the spot pods' spec (grace period, Ray's
drain timeout, the notice agent's poll), the notice agent (the drain deadline it gives Ray)
and the local spot lab (the same budget, time-compressed).

    notice ─┬─ the agent sees it (≤ poll_s) and drains its Ray node, deadline = notice + drain
            ├─ the node group may evict the pod (best effort, assumed ≤ eviction_allowance_s):
            │  SIGTERM → `ray start --block` drains for at most drain_timeout_s, then stops
            │  Ray's processes (≤ ray_stop_s); the kubelet kills the pod after grace_period_s
            └─ warning_s after the notice: the instance is gone

drain_timeout_s = warning − eviction allowance − Ray's stop: a pod evicted within the allowance
keeps its Ray processes at least until the agent's deadline (they live drain_timeout_s past
the eviction, which comes no earlier than the notice) and is gone before the instance. The
deadline the agent announces is that many seconds after the notice, i.e. `warning_s −
drain_timeout_s` before the termination time the notice names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from vocab.spot import SPOT_WARNING_S


class BudgetError(ValueError):
    """A budget whose parts do not fit its warning."""


@dataclass(frozen=True)
class SpotBudget:
    warning_s: float = SPOT_WARNING_S
    """From the notice to the instance's termination (AWS: two minutes)."""
    poll_s: float = 2.0
    """How often the notice agent asks the metadata service: the notice reaches Ray's drain
    at most this late (AWS suggests every 5 s; asking a local endpoint costs nothing)."""
    eviction_allowance_s: float = 10.0
    """How late after the notice the node group's eviction may start and still fit (EKS
    documents no delay: "best effort")."""
    ray_stop_s: float = 10.0
    """From the end of Ray's drain window to the Ray container's exit (Ray stops its
    processes), inside the pod's grace period."""

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise BudgetError(f"{item.name} must be a number > 0, got {value!r}")
        if self.poll_s > self.eviction_allowance_s:
            raise BudgetError(f"poll_s ({self.poll_s:g}) must not exceed eviction_allowance_s "
                              f"({self.eviction_allowance_s:g}): the agent's drain must start "
                              "before the eviction may")
        if self.drain_timeout_s <= self.poll_s:
            raise BudgetError(f"the drain window ({self.drain_timeout_s:g} s) must be longer "
                              f"than the poll ({self.poll_s:g} s): warning_s {self.warning_s:g} "
                              "is too short for these reserves")

    @property
    def drain_timeout_s(self) -> float:
        """Ray's drain window: RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S of a spot node, and the
        time from the notice to the deadline the agent gives Ray."""
        return self.warning_s - self.eviction_allowance_s - self.ray_stop_s

    @property
    def grace_period_s(self) -> float:
        """The spot pod's terminationGracePeriodSeconds: the drain window, then Ray's stop."""
        return self.drain_timeout_s + self.ray_stop_s

    @property
    def deadline_margin_s(self) -> float:
        """How long before the termination the notice names the drain deadline falls."""
        return self.warning_s - self.drain_timeout_s

    def drain_deadline(self, termination_epoch_s: float) -> float:
        """The deadline (epoch seconds) to drain with, for a notice naming this termination."""
        return termination_epoch_s - self.deadline_margin_s

    def compressed(self, factor: float) -> SpotBudget:
        """The same budget with every time divided by `factor` (the spot lab's clock)."""
        if not (math.isfinite(factor) and factor > 0):
            raise BudgetError(f"a compression factor must be > 0, got {factor!r}")
        return SpotBudget(**{item.name: getattr(self, item.name) / factor
                             for item in fields(self)})

    def table(self) -> list[tuple[str, float, str]]:
        """(what, seconds, why) per line: the budget as docs/aws.md shows it."""
        return [
            ("spot warning: notice → termination", self.warning_s, "AWS's two minutes"),
            ("the notice agent's poll", self.poll_s,
             "a notice reaches Ray's drain at most this late (AWS suggests every 5 s; the "
             "metadata service is local)"),
            ("eviction allowance", self.eviction_allowance_s,
             "how late after the notice the node group's eviction may start and still fit "
             "(EKS documents no bound)"),
            ("Ray's stop", self.ray_stop_s,
             "from the end of Ray's drain to the Ray container's exit"),
            ("drain window: the agent's deadline after the notice, and "
             "`RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S`", self.drain_timeout_s,
             "warning − eviction allowance − Ray's stop"),
            ("the spot pod's `terminationGracePeriodSeconds`", self.grace_period_s,
             "drain window + Ray's stop"),
        ]


AWS_BUDGET = SpotBudget()
"""The budget on AWS, in real seconds."""


def lab_budget(warning_s: float) -> SpotBudget:
    """AWS's budget on a spot lab's clock, whose warning is `warning_s` instead of 120 s."""
    return AWS_BUDGET.compressed(AWS_BUDGET.warning_s / warning_s)
