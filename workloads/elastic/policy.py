"""Ray Train V2's elastic scaling policy with the seed's worker-count rule and no lost step
on a resize (the only place that reaches into Ray Train's internals; Ray is pinned).

Ray Train's own ElasticScalingPolicy starts or restarts a worker group with every worker
that fits, and every `elastic_resize_monitor_interval_s` (--cluster-rescale-timeout)
restarts a running group at once when that number changed, from the last checkpoint. Here
the number is the run's ledger's choice (workloads/elastic/scaling.choose_workers on the
throughput measured so far), and a running group is resized only once its ranks have
checkpointed and parked for it (ElasticLoop does so when it sees the choice differ from its
size), so a resize never throws a step away.
"""

from __future__ import annotations

import time
from typing import Any

import ray
from ray.train.torch import TorchTrainer
from ray.train.v2._internal.execution.scaling_policy import (
    ElasticScalingPolicy,
    NoopDecision,
    ResizeDecision,
    ScalingDecision,
)
from ray.train.v2._internal.util import time_monotonic

from workloads.elastic.loop import workers_that_fit

LEDGER_TIMEOUT_S = 5.0


class MeasuredScalingPolicy(ElasticScalingPolicy):  # type: ignore[misc]
    def __init__(self, scaling_config: Any, ledger_name: str) -> None:
        super().__init__(scaling_config)
        self.ledger_name = ledger_name

    def _ask(self, method: str, *args: Any) -> Any:
        ledger = ray.get_actor(self.ledger_name)
        return ray.get(getattr(ledger, method).remote(*args), timeout=LEDGER_TIMEOUT_S)

    def _count_possible_workers(self, reserved_resources: Any) -> int:
        fit = int(super()._count_possible_workers(reserved_resources))
        # Ray Train counts a draining node (a spot node between its notice and its kill) as
        # capacity: restarting after its preemption, it would place a worker there and wait
        # out the worker-group start timeout (60 s) once the node is gone
        try:
            fit = min(fit, workers_that_fit(self.scaling_config._resources_per_worker_not_none))
        except Exception:  # the GCS busy: Ray Train's count
            pass
        try:
            return int(self._ask("choose_workers", fit))
        except Exception:  # the ledger busy or gone: Ray Train's own answer
            return fit

    def make_decision_for_running_worker_group(self, worker_group_state: Any,
                                               worker_group_status: Any) -> ScalingDecision:
        decision = super().make_decision_for_running_worker_group(worker_group_state,
                                                                  worker_group_status)
        if not isinstance(decision, ResizeDecision):
            return decision
        # the group's start on the wall clock the ledger's rows carry
        started = time.time() - (time_monotonic() - worker_group_state.start_time)
        try:
            parked = bool(self._ask("parked_since", started))
        except Exception:
            parked = False
        return decision if parked else NoopDecision()


class ElasticTorchTrainer(TorchTrainer):  # type: ignore[misc]
    """TorchTrainer whose controller runs MeasuredScalingPolicy (elastic runs only)."""

    def __init__(self, *args: Any, ledger_name: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ledger_name = ledger_name

    def _initialize_and_run_controller(self, **controller_init_kwargs: Any) -> Any:
        # ray.train's stubs describe V1's trainer; with Train V2 (the default) these are V2's
        scaling: Any = self.scaling_config
        if scaling.elasticity_enabled:
            controller_init_kwargs["scaling_policy"] = MeasuredScalingPolicy(
                scaling, self.ledger_name)
        parent: Any = super()
        return parent._initialize_and_run_controller(**controller_init_kwargs)
