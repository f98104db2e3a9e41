"""What runs in Ray Train V2's controller for an elastic run (the one place besides the
workers' report hook that reaches into Ray Train's internals; Ray is pinned):

- `MeasuredScalingPolicy`: Ray Train's elastic policy with the original's worker-count rule and
  no lost step on a resize. Ray Train's own ElasticScalingPolicy starts or restarts a worker
  group with every worker that fits, and every `elastic_resize_monitor_interval_s`
  (--cluster-rescale-timeout) restarts a running group at once when that number changed,
  from the last checkpoint. Here the number is the run's ledger's choice
  (workloads/elastic/scaling.choose_workers on the throughput measured so far), draining
  nodes do not count, and a running group that marks its steps is asked to checkpoint and
  park first, then resized at the first poll (every 0.25 s) that finds it parked.
- `RunRecorder`: tells the ledger each worker group's nodes as it is placed, each report
  Ray Train commits (with its checkpoint) and each state the controller goes through
  (preempting with the deadline, restarting and why): the run's account of what reached Ray
  Train, and when. It also removes what a worker group that failed to start left behind:
  Ray Train 2.60 leaks the group's placement group when a worker dies in its backend set-up
  (a node preempted while the group starts); Ray then re-places the orphan on the nodes
  that replace the lost one, and every later group waits for CPUs it holds, forever.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ray
from ray.train.torch import TorchTrainer

from vocab.errors import one_line
from workloads.common import ray_private
from workloads.common.ray_private import (
    ControllerCallback,
    ElasticScalingPolicy,
    FailureDecision,
    FailurePolicy,
    NoopDecision,
    ReportCallback,
    ResizeDecision,
    ScalingDecision,
    WorkerGroupCallback,
    time_monotonic,
)

LEDGER_TIMEOUT_S = 5.0


def workers_that_fit(resources_per_worker: dict[str, float], count_draining: bool = False) -> int:
    """How many workers the alive nodes (and, unless `count_draining`, not draining) hold,
    by their total resources (one job per cluster, as Ray Train's elastic policy assumes)."""
    draining = set() if count_draining else set(ray_private.draining_nodes())
    count = 0
    for node in ray.nodes():
        if not node["Alive"] or node["NodeID"] in draining:
            continue
        total = node["Resources"]
        count += int(min(total.get(name, 0.0) // need
                         for name, need in resources_per_worker.items() if need > 0))
    return count


def _ask(ledger_name: str, method: str, *args: Any) -> Any:
    ledger = ray.get_actor(ledger_name)
    return ray.get(getattr(ledger, method).remote(*args), timeout=LEDGER_TIMEOUT_S)


class MeasuredScalingPolicy(ElasticScalingPolicy):  # type: ignore[misc]
    def __init__(self, scaling_config: Any, ledger_name: str) -> None:
        super().__init__(scaling_config)
        self.ledger_name = ledger_name
        self._running = False  # deciding for a running group (else: for a restart)

    def _count_possible_workers(self, reserved_resources: Any) -> int:
        fit = int(super()._count_possible_workers(reserved_resources))
        # Ray Train counts a draining node (a spot node between its notice and its kill) as
        # capacity: restarting after its preemption, it would place a worker there and wait
        # out the worker-group start timeout once the node is gone
        try:
            fit = min(fit, workers_that_fit(self.scaling_config._resources_per_worker_not_none))
        except Exception:  # the GCS busy: Ray Train's count
            pass
        try:
            return int(_ask(self.ledger_name, "choose_workers", fit, self._running))
        except Exception:  # the ledger busy or gone: Ray Train's own answer
            return fit

    def make_decision_for_running_worker_group(self, worker_group_state: Any,
                                               worker_group_status: Any) -> ScalingDecision:
        """Ray Train's decision (every --cluster-rescale-timeout s); a resize of a group that
        marks its steps is asked of its ranks first (they checkpoint and park), then made
        at the first poll that finds them parked."""
        # the group's start on the wall clock the ledger's rows carry
        started = time.time() - (time_monotonic() - worker_group_state.start_time)
        try:
            pending = _ask(self.ledger_name, "resize_requested")
            if pending is not None:
                parked = bool(_ask(self.ledger_name, "parked_since", started))
                return self._get_resize_decision(int(pending)) if parked else NoopDecision()
        except Exception:
            return NoopDecision()
        self._running = True
        try:
            decision = super().make_decision_for_running_worker_group(worker_group_state,
                                                                      worker_group_status)
        finally:
            self._running = False
        if not isinstance(decision, ResizeDecision):
            return decision
        try:
            if _ask(self.ledger_name, "parked_since", started):
                return decision  # nothing to lose: resized as Ray Train does
            _ask(self.ledger_name, "request_resize", decision.num_workers)
        except Exception:
            pass
        return NoopDecision()


class NoticeAwareFailurePolicy(FailurePolicy):  # type: ignore[misc]
    """Ray Train's failure policy, with the ranks' NoticeHandoff (the group ended itself once
    its notice checkpoint was committed) retried as the preemption it is, never charged to
    --max-failures."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner.failure_config)
        self.inner = inner

    def make_decision(self, training_failed_error: Any) -> FailureDecision:
        from workloads.elastic.worker import handed_off

        if handed_off(training_failed_error):
            return FailureDecision.RETRY
        decision: FailureDecision = self.inner.make_decision(training_failed_error)
        return decision


class RunRecorder(WorkerGroupCallback, ControllerCallback, ReportCallback):  # type: ignore[misc]
    """The controller's side of the run's ledger (see the module's docstring)."""

    def __init__(self, ledger_name: str) -> None:
        self.ledger_name = ledger_name

    @contextmanager
    def on_worker_group_start(self) -> Iterator[None]:
        try:
            yield
        except Exception as error:
            removed = remove_placement_groups_of_this_job()
            self._tell("controller", {"state": "GROUP_START_FAILED",
                                      "error": type(error).__name__,
                                      "preemption": preempted(error),
                                      "placement_groups_removed": removed})
            raise

    def before_init_train_context(self, workers: list[Any]) -> dict[str, list[Any]]:
        ranks = sorted(range(len(workers)), key=lambda index: _rank(workers[index], index))
        nodes = [workers[index].metadata.node_id for index in ranks]
        try:  # before the group trains: a worker's first words to the ledger come later
            _ask(self.ledger_name, "group_started", len(workers), nodes)
        except Exception:
            pass
        return {}

    def after_worker_group_shutdown(self, worker_group_context: Any) -> None:
        # a restart's first part: the old group's workers stopped and killed, its placement
        # group removed (the next group's placement and start follow)
        self._tell("controller", {"state": "GROUP_SHUT_DOWN"})

    def after_report(self, training_report: Any, metrics: list[dict[str, Any]]) -> None:
        checkpoint = training_report.checkpoint
        self._tell("committed", str(checkpoint.path) if checkpoint is not None else None,
                   dict(metrics[0]) if metrics else {})

    def after_controller_state_update(self, previous_state: Any, current_state: Any) -> None:
        if previous_state._state_type == current_state._state_type:
            return  # the control loop sets its state at every iteration
        row: dict[str, Any] = {"state": current_state._state_type.state_name}
        info = getattr(current_state, "preemption_info", None)
        if info is not None:
            row.update(deadline=info.deadline_ms / 1000 if info.deadline_ms else None,
                       nodes=info.preempted_node_ids, ranks=info.preempted_ranks)
        error = getattr(current_state, "training_failed_error", None)
        if error is not None:
            from workloads.elastic.worker import handed_off

            row.update(error=type(error).__name__, handoff=handed_off(error),
                       preemption=(ray_private.is_preemption_failure(error) or preempted(error)
                                   or handed_off(error)),
                       message=one_line(error, limit=300))
        self._tell("controller", row)

    def _tell(self, method: str, *args: Any) -> None:
        try:
            getattr(ray.get_actor(self.ledger_name), method).remote(*args)
        except Exception:  # the ledger gone (the run ending): nothing left to tell
            pass


def preempted(error: BaseException | None) -> bool:
    """Whether an error came of a node's preemption: a worker actor that died with its
    drained node (RayActorError.preempted), anywhere in the error's chain of causes."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if getattr(error, "preempted", False) is True:
            return True
        error = getattr(error, "controller_failure", None) or error.__cause__
    return False


LIVE_PLACEMENT_GROUP_STATES = ("PENDING", "PREPARED", "CREATED", "RESCHEDULING")


def remove_placement_groups_of_this_job() -> list[str]:
    """Remove this job's live placement groups (called while the controller has no worker
    group: a group start failed, so any that is live is the failed group's); their actors
    die with them. Returns the ids removed."""
    from ray.util.placement_group import placement_group_table

    job = ray.get_runtime_context().get_job_id()
    removed = []
    for hex_id, row in placement_group_table().items():
        if hex_id.endswith(job) and row["state"] in LIVE_PLACEMENT_GROUP_STATES:
            ray.util.remove_placement_group(ray_private.placement_group(hex_id))
            removed.append(hex_id)
    return removed


def _rank(worker: Any, index: int) -> int:
    context = getattr(worker, "distributed_context", None)
    return int(context.world_rank) if context is not None else index


class ElasticTorchTrainer(TorchTrainer):  # type: ignore[misc]
    """TorchTrainer whose controller runs NoticeAwareFailurePolicy and (elastic runs)
    MeasuredScalingPolicy."""

    def __init__(self, *args: Any, ledger_name: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ledger_name = ledger_name

    def _initialize_and_run_controller(self, **controller_init_kwargs: Any) -> Any:
        # ray.train's stubs describe V1's trainer; with Train V2 (the default) these are V2's
        scaling: Any = self.scaling_config
        controller_init_kwargs["failure_policy"] = NoticeAwareFailurePolicy(
            controller_init_kwargs["failure_policy"])
        if scaling.elasticity_enabled:
            controller_init_kwargs["scaling_policy"] = MeasuredScalingPolicy(
                scaling, self.ledger_name)
        parent: Any = super()
        return parent._initialize_and_run_controller(**controller_init_kwargs)
