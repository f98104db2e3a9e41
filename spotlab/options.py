"""The spot lab's settings as command-line options, declared once (workloads/common/options.py):
`invoke spot-lab-up` and every spot workload's run task (`run-elastic`, `run-rl`, `infer-up`)
take their lab flags from LAB_SPEC, and `SpotLabOptions.config()` is the lab they describe.

Flags are named for the lab (`--spot`, `--warning`, `--lab-seed`), so a workload's own flags
(`--seed`, `--cpus`) never collide with them; `options_task` refuses specs that share a flag.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from spotlab.config import (
    DEFAULT_COMPRESSION,
    MAX_NODES_PER_POOL,
    MIN_OBJECT_STORE_MB,
    REBALANCE_LEAD_S,
    SpotLabConfig,
    SpotLabConfigError,
)
from vocab.spot import SPOT_WARNING_S
from workloads.common.options import OptionError, OptionSpec, check_fields, option

_DEFAULTS = SpotLabConfig()
MIN_STEP_S = 0.01
"""The shortest chain step or notice warning the supervisor can keep to (its loop's scale)."""
MAX_LAB_S = 86_400.0


@dataclass(frozen=True, kw_only=True)
class SpotLabOptions:
    """A local spot lab: a head, on-demand, learner and spot worker nodes, and how the spot
    nodes are preempted (the schedule: a Markov chain, a price trace with a bid, or explicit
    times; rebalance recommendations ahead of some)."""

    spot: int = option(_DEFAULTS.spot, "spot worker nodes, preempted by the chosen model",
                       minimum=0, maximum=MAX_NODES_PER_POOL)
    on_demand: int = option(_DEFAULTS.on_demand, "on-demand worker nodes, never preempted",
                            minimum=0, maximum=MAX_NODES_PER_POOL)
    learner: int = option(_DEFAULTS.learner,
                          "learner nodes: on-demand, with the `learner` resource",
                          minimum=0, maximum=MAX_NODES_PER_POOL)
    cpus_per_node: int = option(_DEFAULTS.cpus_per_node, "CPUs each worker node offers to Ray",
                                minimum=1, maximum=64)
    head_cpus: int = option(_DEFAULTS.head_cpus,
                            "CPUs the head offers to Ray (0: no work on the head)",
                            minimum=0, maximum=64)
    alpha: float = option(_DEFAULTS.alpha,
                          "Markov model: spot availability α; 1 = never preempted",
                          above=0.0, maximum=1.0)
    refresh: float = option(_DEFAULTS.refresh_s,
                            f"Markov model: seconds between chain steps (the paper's 2 s / "
                            f"{DEFAULT_COMPRESSION:g})", minimum=MIN_STEP_S,
                            maximum=MAX_LAB_S)
    trace: str | None = option(None, "price model: a describe-spot-price-history JSON file "
                                     "(needs --bid)", path="file")
    bid: float | None = option(None, "price model: $/h; a spot node is preempted while the "
                                     "price is above it", above=0.0)
    zone: str = option(_DEFAULTS.zone, "price trace: availability zone to replay")
    product: str = option(_DEFAULTS.product, "price trace: ProductDescription to replay")
    trace_compression: float = option(_DEFAULTS.trace_compression,
                                      "price trace: trace seconds per lab second", above=0.0,
                                      maximum=1e6)
    capacity_trace: str | None = option(
        None, "capacity model: a spot capacity trace (JSON {\"metadata\": {\"gap_seconds\": "
              "N}, \"data\": [count, ...]}, the public spot-traces format), replayed with "
              "--trace-compression trace seconds per lab second like a price trace, looping, "
              "from a tick drawn from --lab-seed (0: the first); spot slot i has capacity "
              "while the count is above i, so a fall sends the nodes above it their notice",
        path="file")
    warning: float = option(_DEFAULTS.warning_s,
                            f"seconds from a notice to the kill (AWS's {SPOT_WARNING_S:g} s / "
                            f"{DEFAULT_COMPRESSION:g})", minimum=MIN_STEP_S,
                            maximum=MAX_LAB_S)
    replace_delay: float = option(_DEFAULTS.replace_delay_s,
                                  "seconds from a kill until a replacement node may start",
                                  minimum=0.0, maximum=MAX_LAB_S)
    on_demand_price: float = option(_DEFAULTS.on_demand_price,
                                    "$/h of an on-demand node, for the lab's bill", minimum=0.0,
                                    maximum=1000.0)
    lab_seed: int = option(_DEFAULTS.seed, "seed of the lab's preemption chains", minimum=0,
                           maximum=2**32 - 1)
    object_store_mb: int = option(_DEFAULTS.object_store_mb, "object store of each node (MB; "
                                  "at most this machine's memory)", minimum=MIN_OBJECT_STORE_MB,
                                  maximum=1 << 20)
    preemptions: str | None = option(
        None, "when spot nodes are interrupted: model (the Markov chain of --alpha/--refresh/"
              "--lab-seed, or the price trace of --trace/--bid), none, or at:T,T,... (times "
              "after the start: 90, 90s, 5m, 1h; a time twice interrupts two nodes): on the "
              "spot lab (not set: model), or on a --stack through its AWS FIS templates "
              "(not set: only AWS interrupts)")
    rebalance_chance: float = option(_DEFAULTS.rebalance_chance,
                                     "chance that an interruption is preceded by a rebalance "
                                     "recommendation (0: none); the node group then starts a "
                                     "replacement and drains the node once it joins",
                                     minimum=0.0, maximum=1.0)
    rebalance_lead: float = option(REBALANCE_LEAD_S,
                                   "seconds from a rebalance recommendation to its "
                                   "interruption (AWS's 10-20 minutes, compressed)",
                                   minimum=0.0, maximum=MAX_LAB_S)
    drain_on_rebalance: bool = option(False, "the notice agents drain their Ray node at a "
                                             "rebalance recommendation too")
    keep_data: bool = option(False, "keep the lab's shared folder (SPOTBURST_SHARED on every "
                                    "node) when the lab is removed")

    def __post_init__(self) -> None:
        check_fields(self)
        memory_mb = machine_memory_mb()
        if memory_mb is not None and self.object_store_mb > memory_mb:
            raise OptionError("--object-store-mb", f"expected at most this machine's memory "
                              f"({memory_mb} MB), got {self.object_store_mb}")
        self.config()  # rules across fields (--trace needs --bid, a readable trace)

    def config(self, *, dashboard: bool = True) -> SpotLabConfig:
        """The lab these options describe (its dashboard on: runs go through its Jobs API)."""
        try:
            return SpotLabConfig(
                spot=self.spot,
                on_demand=self.on_demand,
                learner=self.learner,
                cpus_per_node=self.cpus_per_node,
                head_cpus=self.head_cpus,
                alpha=self.alpha,
                refresh_s=self.refresh,
                trace=self.trace,
                bid=self.bid,
                zone=self.zone,
                product=self.product,
                trace_compression=self.trace_compression,
                capacity_trace=self.capacity_trace,
                warning_s=self.warning,
                replace_delay_s=self.replace_delay,
                on_demand_price=self.on_demand_price,
                seed=self.lab_seed,
                object_store_mb=self.object_store_mb,
                dashboard=dashboard,
                preemptions=self.preemptions,
                rebalance_chance=self.rebalance_chance,
                rebalance_lead_s=self.rebalance_lead,
                drain_on_rebalance=self.drain_on_rebalance,
                keep_data=self.keep_data,
            )
        except SpotLabConfigError as error:
            flag, _, problem = str(error).partition(" ")
            flag = flag.removesuffix(":")  # "--trace: FILE is ..." names its flag that way too
            raise OptionError(flag if flag.startswith("--") else "--spot", problem) from None


def machine_memory_mb() -> int | None:
    """This machine's physical memory in MB (None where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20
    except (ValueError, OSError):
        return None


LAB_SPEC = OptionSpec(SpotLabOptions)
