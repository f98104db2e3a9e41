"""What a spot lab is made of and how its spot nodes are preempted: one validated dataclass.

Times are lab (wall-clock) seconds, already compressed: the default warning is AWS's two
minutes divided by DEFAULT_COMPRESSION, the Markov chain steps every refresh_s (the paper's
2 s refresh, compressed the same way), a rebalance recommendation comes rebalance_lead_s
before its interruption (AWS: often 10–20 minutes, here 15 minutes compressed). An explicit
schedule's times (`--preemptions at:...`) are the run's own seconds, never compressed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from vocab.errors import UserError
from vocab.preemptions import MODEL, PreemptionSchedule, ScheduleError, parse_schedule
from vocab.spot import POOL_HEAD, POOL_LEARNER, POOL_ON_DEMAND, POOL_SPOT, SPOT_WARNING_S
from vocab.spot_budget import SpotBudget, lab_budget
from workloads.common.spot_market.capacity import (
    CapacityTrace,
    CapacityTraceError,
    load_capacity_trace,
)
from workloads.common.spot_market.trace import DEFAULT_TRACE, PriceTrace, TraceError, load_trace

DEFAULT_COMPRESSION = 20.0
"""Lab seconds are AWS seconds / 20: a 120 s notice becomes 6 s, a 2 s refresh 0.1 s."""
REBALANCE_LEAD_S = 15 * 60.0 / DEFAULT_COMPRESSION
MAX_NODES_PER_POOL = 16
MIN_OBJECT_STORE_MB = 80


class SpotLabConfigError(UserError, ValueError):
    """A bad lab setting; the message starts with the flag that names it."""


def flag(field_name: str) -> str:
    """The command-line flag of a setting: `warning_s` is `--warning` (in seconds)."""
    return "--" + field_name.removesuffix("_s").replace("_", "-")


@dataclass(frozen=True)
class NodeSpec:
    """One Ray node of the lab. `slot` is the spot slot a spot node fills (its preemption
    chain); a replacement fills the slot of the node it replaces under a new name."""

    name: str
    pool: str
    num_cpus: int
    slot: int | None = None


@dataclass(frozen=True)
class SpotLabConfig:
    spot: int = 3
    on_demand: int = 1
    learner: int = 0
    cpus_per_node: int = 1
    head_cpus: int = 0
    alpha: float = 0.9
    refresh_s: float = 2.0 / DEFAULT_COMPRESSION
    trace: str | None = None
    bid: float | None = None
    zone: str = "ca-central-1b"
    product: str = "SUSE Linux"
    trace_compression: float = 2000.0
    capacity_trace: str | None = None
    """Spot capacity per tick (workloads/common/spot_market/capacity.py): slot i has capacity
    while the trace holds more than i instances; replaces the Markov chain."""
    warning_s: float = SPOT_WARNING_S / DEFAULT_COMPRESSION
    replace_delay_s: float = 60.0 / DEFAULT_COMPRESSION
    on_demand_price: float = 0.286
    seed: int = 0
    object_store_mb: int = 100
    dashboard: bool = True
    """The head's dashboard (and Ray Jobs API) on loopback; off makes a quicker lab."""
    preemptions: str | None = None
    """The schedule (vocab/preemptions.py); None: `model`."""
    rebalance_chance: float = 0.0
    """The chance that an interruption is preceded by a rebalance recommendation (0: never,
    the lab as it was before it modelled them)."""
    rebalance_lead_s: float = REBALANCE_LEAD_S
    drain_on_rebalance: bool = False
    """The notice agents drain their node at a rebalance recommendation too."""
    keep_data: bool = False
    """The lab's shared folder ($SPOTBURST_SHARED) outlives the lab (else removed with it)."""

    def __post_init__(self) -> None:
        for name in ("spot", "on_demand", "learner"):
            count = getattr(self, name)
            if not 0 <= count <= MAX_NODES_PER_POOL:
                raise SpotLabConfigError(f"{flag(name)} must be in 0..{MAX_NODES_PER_POOL}, "
                                         f"got {count}")
        if not 1 <= self.cpus_per_node <= 64:
            raise SpotLabConfigError(f"--cpus-per-node must be in 1..64, got {self.cpus_per_node}")
        if not 0 <= self.head_cpus <= 64:
            raise SpotLabConfigError(f"--head-cpus must be in 0..64, got {self.head_cpus}")
        if not 0.0 < self.alpha <= 1.0:
            raise SpotLabConfigError(f"--alpha must be in (0, 1], got {self.alpha}")
        for name in ("refresh_s", "warning_s", "trace_compression"):
            if not getattr(self, name) > 0:
                raise SpotLabConfigError(f"{flag(name)} must be > 0, got {getattr(self, name)}")
        for name in ("replace_delay_s", "on_demand_price"):
            if not getattr(self, name) >= 0:
                raise SpotLabConfigError(f"{flag(name)} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.rebalance_chance <= 1.0:
            raise SpotLabConfigError(f"--rebalance-chance must be in 0..1, got "
                                     f"{self.rebalance_chance}")
        if not self.rebalance_lead_s >= 0:
            raise SpotLabConfigError(f"--rebalance-lead must be >= 0, got "
                                     f"{self.rebalance_lead_s}")
        schedule = self.schedule()
        if schedule.kind != MODEL and (self.trace is not None or self.bid is not None):
            raise SpotLabConfigError(f"--{'trace' if self.trace is not None else 'bid'} only "
                                     f"goes with --preemptions {MODEL} (the price model), not "
                                     f"{schedule.text}")
        if (self.trace is None) != (self.bid is None):
            given, missing = ("trace", "bid") if self.bid is None else ("bid", "trace")
            raise SpotLabConfigError(f"{flag(missing)} is required with {flag(given)}")
        if self.bid is not None and not self.bid > 0:
            raise SpotLabConfigError(f"--bid must be > 0 ($/h), got {self.bid}")
        if self.capacity_trace is not None and (schedule.kind != MODEL or self.trace is not None):
            other = "--trace/--bid" if self.trace is not None else f"--preemptions {schedule.text}"
            raise SpotLabConfigError(f"--capacity-trace is the lab's model: it does not go "
                                     f"with {other}")
        if self.capacity_trace is not None:
            self.capacity()  # a trace that cannot be read fails here, naming its file
        if self.object_store_mb < MIN_OBJECT_STORE_MB:
            raise SpotLabConfigError(f"--object-store-mb must be >= {MIN_OBJECT_STORE_MB}, "
                                     f"got {self.object_store_mb}")
        self.price_trace()  # a trace that cannot be read fails here, naming --trace

    @property
    def preemption_model(self) -> str:
        if self.capacity_trace is not None:
            return "capacity"
        return "trace" if self.trace is not None else "markov"

    def capacity(self) -> CapacityTrace:
        """The --capacity-trace file, read and checked."""
        assert self.capacity_trace is not None
        try:
            return load_capacity_trace(Path(self.capacity_trace))
        except CapacityTraceError as error:
            raise SpotLabConfigError(str(error)) from None

    def schedule(self) -> PreemptionSchedule:
        """The `--preemptions` schedule (not set: the lab's model)."""
        try:
            return parse_schedule(MODEL if self.preemptions is None else self.preemptions)
        except ScheduleError as error:
            raise SpotLabConfigError(f"--preemptions {error}") from None

    def budget(self) -> SpotBudget:
        """AWS's spot timing budget on this lab's clock (its warning instead of 120 s)."""
        return lab_budget(self.warning_s)

    def price_trace(self) -> PriceTrace:
        """The trace that prices spot time (and preempts, with a bid): --trace, else the
        shipped one (for billing only)."""
        try:
            return load_trace(Path(self.trace or DEFAULT_TRACE), self.zone, self.product)
        except TraceError as error:
            raise SpotLabConfigError(str(error)) from None

    def nodes(self) -> list[NodeSpec]:
        """The nodes the lab starts with, the head first."""
        specs = [NodeSpec("head", POOL_HEAD, self.head_cpus)]
        specs += [NodeSpec(f"od-{i}", POOL_ON_DEMAND, self.cpus_per_node)
                  for i in range(self.on_demand)]
        specs += [NodeSpec(f"learner-{i}", POOL_LEARNER, self.cpus_per_node)
                  for i in range(self.learner)]
        specs += [NodeSpec(f"spot-{i}", POOL_SPOT, self.cpus_per_node, slot=i)
                  for i in range(self.spot)]
        return specs

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpotLabConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpotLabConfigError(f"{flag(unknown[0])}: unknown setting")
        return cls(**data)
