"""Every private Ray API the workloads use (and the spot lab above them), in one place.

Each function or name here says which public API it stands in for, or why there is none.
Errors from Ray come through as Ray raises them: a caller that keeps going past one says so
itself. tests/workloads/test_ray_private.py imports every private name listed in PRIVATE and
checks the parameters we pass, so a Ray upgrade that moves or changes one fails there,
naming it, not somewhere in a run.

Imports the standard library and Ray only: the notice agent runs it from Ray's image, where
the project is not installed (vocab/spot.py's NOTICE_AGENT_FILES). Ray Train's internals are
imported when first asked for (module `__getattr__`), so the agent never loads Ray Train.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Private:
    module: str
    name: str
    parameters: dict[str, tuple[str, ...]]
    """What we call on it -> the parameter names we pass ("" is the object itself; a dotted
    name is a method of it); checked against Ray's signatures by the seam's test."""
    why: str
    """The public API it stands in for, or why there is none."""


PRIVATE: dict[str, Private] = {
    "GcsClient": Private(
        "ray._raylet", "GcsClient", {"": ()},
        "none: the GCS's node table and DrainNode without a driver (the notice agent must "
        "not join the cluster it drains); `ray drain-node` is this call behind a hidden CLI"),
    "InnerGcsClient": Private(
        "ray._raylet", "InnerGcsClient",
        {"get_all_node_info": ("timeout",),
         "drain_node": ("node_id", "reason", "reason_message", "deadline_timestamp_ms",
                        "timeout")},
        "none: the methods GcsClient hands every call to (it has no signatures of its own)"),
    "GlobalState": Private(
        "ray._private.state", "GlobalState",
        {"_initialize_global_state": ("gcs_options",), "node_table": (),
         "get_draining_nodes": (), "disconnect": ()},
        "none: ray.nodes() without a driver (the lab's supervisor is none: no core worker, "
        "no Ray signal handlers in its process)"),
    "GcsClientOptions": Private(
        "ray._raylet", "GcsClientOptions",
        {"create": ("gcs_address", "cluster_id_hex", "allow_cluster_id_nil",
                    "fetch_cluster_id_if_nil")},
        "none: how GlobalState connects to a GCS address"),
    "state": Private(
        "ray._private.state", "state", {"get_draining_nodes": ()},
        "none: ray.nodes() and ray.util.state.list_nodes() show a draining node as ALIVE, "
        "with no deadline"),
    "actors": Private(
        "ray._private.state", "actors", {"": ("actor_id",)},
        "ray.util.state.get_actor, which asks the dashboard (absent where it is off) over "
        "HTTP at every call; this reads the GCS's actor table through the driver"),
    "PlacementGroupID": Private(
        "ray._raylet", "PlacementGroupID", {"": ("id",)},
        "none: ray.util.placement_group_table() lists ids, and only a PlacementGroup made "
        "from one can be removed (ray.util.get_placement_group takes a name)"),
    "DrainNodeReason": Private(
        "ray.core.generated.autoscaler_pb2", "DrainNodeReason", {"Value": ()},
        "none: the reason code DrainNode takes (generated from Ray's protobuf)"),
    "ControllerCallback": Private(
        "ray.train.v2._internal.execution.callback", "ControllerCallback",
        {"after_controller_state_update": ("previous_state", "current_state")},
        "ray.train.UserCallback sees reports and errors, not the controller's states (its "
        "restarts, resizes and preemptions), which the elastic run records"),
    "ReportCallback": Private(
        "ray.train.v2._internal.execution.callback", "ReportCallback",
        {"after_report": ("training_report", "metrics")},
        "ray.train.UserCallback.after_report: not handed to the controller's policies"),
    "WorkerGroupCallback": Private(
        "ray.train.v2._internal.execution.callback", "WorkerGroupCallback",
        {"before_worker_group_shutdown": ("worker_group",)},
        "none: when a worker group starts and stops"),
    "TrainContextCallback": Private(
        "ray.train.v2._internal.execution.callback", "TrainContextCallback",
        {"on_report": ()},
        "none on a worker: around each ray.train.report (which report carried a checkpoint)"),
    "FailurePolicy": Private(
        "ray.train.v2._internal.execution.failure_handling", "FailurePolicy",
        {"make_decision": ("training_failed_error",)},
        "ray.train.FailureConfig(max_failures) only counts; a preemption must not count"),
    "FailureDecision": Private(
        "ray.train.v2._internal.execution.failure_handling", "FailureDecision", {},
        "none: what a FailurePolicy answers"),
    "is_preemption_failure": Private(
        "ray.train.v2._internal.execution.failure_handling.default",
        "_is_preemption_failure", {"": ("training_failed_error",)},
        "none: whether Ray Train took a failure for a preemption"),
    "ElasticScalingPolicy": Private(
        "ray.train.v2._internal.execution.scaling_policy", "ElasticScalingPolicy",
        {"": ("scaling_config",)},
        "ray.train.ScalingConfig(num_workers=(min, max)) chooses by the resources alone; "
        "the elastic run chooses by the throughput it measured"),
    "NoopDecision": Private(
        "ray.train.v2._internal.execution.scaling_policy", "NoopDecision", {},
        "none: what a ScalingPolicy answers"),
    "ResizeDecision": Private(
        "ray.train.v2._internal.execution.scaling_policy", "ResizeDecision",
        {"": ("num_workers", "resources_per_worker")},
        "none: what a ScalingPolicy answers"),
    "ScalingDecision": Private(
        "ray.train.v2._internal.execution.scaling_policy", "ScalingDecision", {},
        "none: what a ScalingPolicy answers"),
    "time_monotonic": Private(
        "ray.train.v2._internal.util", "time_monotonic", {"": ()},
        "time.monotonic, as Ray Train's own policies read it (tests patch this one)"),
    "construct_user_exception_with_traceback": Private(
        "ray.train.v2._internal.util", "construct_user_exception_with_traceback", {},
        "none: its module's logger is the one that logs a training function's error"),
    "get_train_context": Private(
        "ray.train.v2._internal.execution.context", "get_train_context", {"": ()},
        "ray.train.get_context() lacks the preemption signal and the last checkpoint"),
    "TrainFnUtils": Private(
        "ray.train.v2._internal.execution.train_fn_utils", "TrainFnUtils", {},
        "none: what ray.train.report/get_context/get_checkpoint call in a training function; "
        "a --torchft replica group (an actor of the run's, not a Ray Train worker) gives its "
        "own, as Ray Train's local mode does"),
    "set_train_fn_utils": Private(
        "ray.train.v2._internal.execution.train_fn_utils", "set_train_fn_utils",
        {"": ("train_fn_utils",)},
        "none: installs a TrainFnUtils in this process"),
    "LocalTrainContext": Private(
        "ray.train.v2.api.context", "LocalTrainContext",
        {"": ("experiment_name", "world_size", "world_rank")},
        "ray.train.get_context()'s answer outside a Ray Train worker group (not exported)"),
    "LighthouseServerActor": Private(
        "ray.train.v2.torch.torchft_config", "LighthouseServerActor", {},
        "ray.train.v2.torch.torchft_config.TorchftConfig starts it inside Ray Train's "
        "controller only; the run's own controller starts the same actor"),
    "deprecation": Private(
        "ray._common.deprecation", "", {},
        "none: the logger RLlib's own deprecation warnings go to"),
}
"""Name here -> where Ray keeps it, what we call on it, and why it is not public."""

_LAZY = {name for name, private in PRIVATE.items()
         if private.module.startswith(("ray.train", "ray._common"))}


def load_private(table: dict[str, Private], name: str) -> Any:
    """The private object `table` lists as `name` (a module when its name is ""), imported
    now."""
    private = table[name]
    module = importlib.import_module(private.module)
    return getattr(module, private.name) if private.name else module


def load(name: str) -> Any:
    return load_private(PRIVATE, name)


def __getattr__(name: str) -> Any:
    """Ray Train's internals, imported on first use (`from ... import FailurePolicy`)."""
    if name in _LAZY:
        return load(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- the GCS, with and without a driver ------------------------------------------------------


def gcs_client(address: str) -> Any:
    """Ray's GCS client for `address`, with the token the environment gives (RAY_AUTH_MODE,
    RAY_AUTH_TOKEN_PATH), without joining the cluster. See PRIVATE["GcsClient"]."""
    return load("GcsClient")(address=address)


@dataclass(frozen=True)
class GcsNode:
    node_id: str
    """Hex text, as Ray's public APIs show it."""
    ip: str
    node_manager_port: int


def alive_nodes(client: Any, timeout_s: float) -> list[GcsNode]:
    """The alive nodes in the GCS's node table."""
    alive = 0  # GcsNodeInfo.ALIVE
    return [GcsNode(str(node_id.hex()), str(info.node_manager_address),
                    int(info.node_manager_port))
            for node_id, info in client.get_all_node_info(timeout=timeout_s).items()
            if info.state == alive]


def drain_for_preemption(client: Any, node_id: str, deadline_epoch_s: float, message: str,
                         timeout_s: float) -> tuple[bool, str]:
    """Drain node `node_id` (HEX text: the GCS client decodes it with NodeID.FromHex; the
    binary id its docstring asks for is accepted and drains nothing) with reason PREEMPTION
    and this deadline: (accepted, why not)."""
    reason = load("DrainNodeReason").Value("DRAIN_NODE_REASON_PREEMPTION")
    accepted, why_not = client.drain_node(node_id, reason, message,
                                          int(deadline_epoch_s * 1000), timeout=timeout_s)
    return bool(accepted), str(why_not)


class GcsState:
    """The node table and the draining nodes of the cluster at `address`, read without a
    driver. See PRIVATE["GlobalState"]."""

    def __init__(self, address: str) -> None:
        self._state = load("GlobalState")()
        self._state._initialize_global_state(load("GcsClientOptions").create(
            gcs_address=address, cluster_id_hex=None, allow_cluster_id_nil=True,
            fetch_cluster_id_if_nil=False))

    def node_table(self) -> list[dict[str, Any]]:
        """What ray.nodes() answers."""
        table: list[dict[str, Any]] = self._state.node_table()
        return table

    def draining_nodes(self) -> dict[str, int]:
        return draining_nodes(self._state)

    def disconnect(self) -> None:
        self._state.disconnect()


def draining_nodes(source: Any = None) -> dict[str, int]:
    """The nodes being drained (hex id -> the drain's deadline in epoch ms, 0 for none), from
    this process's driver connection, or from `source` (a GcsState's). See PRIVATE["state"]."""
    state = load("state") if source is None else source
    return dict(state.get_draining_nodes())


def actor_info(actor_id: str) -> dict[str, Any]:
    """The GCS's actor table row of one actor (State, NumRestarts, ...), through this
    process's driver connection. See PRIVATE["actors"]."""
    info: dict[str, Any] = load("actors")(actor_id=actor_id)
    return info


def placement_group(hex_id: str) -> Any:
    """The PlacementGroup with this id (as placement_group_table() lists it), to remove it.
    See PRIVATE["PlacementGroupID"]."""
    from ray.util.placement_group import PlacementGroup

    return PlacementGroup(load("PlacementGroupID")(bytes.fromhex(hex_id)))


# --- names -----------------------------------------------------------------------------------


def training_error_logger_name() -> str:
    """The logger Ray Train logs a training function's error with."""
    return str(load("construct_user_exception_with_traceback").__module__)


def deprecation_logger_name() -> str:
    """The logger RLlib's deprecation warnings go to."""
    return str(load("deprecation").__name__)
