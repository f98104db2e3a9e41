"""The service seen from a driver connected to its Ray cluster: bring the coordinator up or
down and call its commands through Ray (the experiment's driver and the tests do; the CLI
sends its commands over HTTP instead: `workloads/inference/endpoint.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from vocab.spot import ON_DEMAND_RESOURCE, SPOT_RESOURCE
from workloads.common.actors import start_actor
from workloads.inference.coordinator import (
    COORDINATOR_NAME,
    COORDINATOR_OPTIONS,
    NAMESPACE,
    Coordinator,
)
from workloads.inference.endpoint import COMMAND_TOKEN_ENV, ServiceError, command_timeout_s


def start_coordinator(settings: dict[str, Any], on_demand: bool = True) -> Any:
    """The detached coordinator (restarted by Ray whenever it dies), on an on-demand node."""
    try:
        ray.get_actor(COORDINATOR_NAME, namespace=NAMESPACE)
    except ValueError:
        pass
    else:
        raise ServiceError("the inference service is already up on this cluster "
                           "(infer-down first)")
    # the token reaches the coordinator in its settings; neither it nor its workers (whose
    # runtime env inherits this one) keep the up job's copy in their environment
    options: dict[str, Any] = {"name": COORDINATOR_NAME, "namespace": NAMESPACE,
                               "lifetime": "detached", "num_cpus": 0,
                               "runtime_env": {"env_vars": {COMMAND_TOKEN_ENV: ""}},
                               **COORDINATOR_OPTIONS}
    if on_demand:
        options["resources"] = {ON_DEMAND_RESOURCE: 0.5}
    handle = start_actor(Coordinator, settings, options=options)
    ray.get(handle.command.remote("job_status", []), timeout=120)  # up, its state loaded
    return handle


def check_store_reaches_every_node(store: str) -> None:
    """A folder store serves a cluster only when all its nodes are on one machine (the
    local lab); a cluster of several machines needs an s3:// store."""
    if urlparse(store).scheme == "s3":
        return
    if not Path(store).is_absolute():
        raise ServiceError(f"--store {store!r}: a relative folder is each node's own; "
                           "give an absolute folder or s3://BUCKET/PREFIX")
    hosts = {node["NodeManagerAddress"] for node in ray.nodes() if node["Alive"]}
    if len(hosts) > 1:
        raise ServiceError(f"--store {store!r}: a folder is not shared by this cluster's "
                           f"{len(hosts)} machines; give s3://BUCKET/PREFIX")


def start_on_this_cluster(settings: dict[str, Any]) -> Any:
    """The coordinator on the cluster this driver is connected to, placed by what it has:
    workers on spot nodes and the coordinator on an on-demand one when it has them."""
    check_store_reaches_every_node(settings["store"])
    resources = ray.cluster_resources()
    settings = {**settings,
                "worker_resource": SPOT_RESOURCE if SPOT_RESOURCE in resources else None}
    return start_coordinator(settings, on_demand=ON_DEMAND_RESOURCE in resources)


def coordinator() -> Any:
    try:
        return ray.get_actor(COORDINATOR_NAME, namespace=NAMESPACE)
    except ValueError:
        raise ServiceError("the inference service is not up on this cluster "
                           "(invoke infer-up)") from None


def call(method: str, *args: Any, timeout_s: float | None = None) -> dict[str, Any]:
    """One command; its answer, or ServiceError with the coordinator's one-line reason.
    Awaited `timeout_s`, by default as long as the CLI awaits it."""
    timeout_s = command_timeout_s(method) if timeout_s is None else timeout_s
    handle = coordinator()
    try:
        answer: dict[str, Any] = ray.get(handle.command.remote(method, list(args)),
                                         timeout=timeout_s)
    except GetTimeoutError:
        raise ServiceError(f"the coordinator did not answer {method} within {timeout_s:g} s "
                           "(restarting? try again)") from None
    except RayActorError as error:
        raise ServiceError(f"the coordinator is unavailable: {error}") from None
    if not answer.get("ok"):
        raise ServiceError(str(answer.get("error")))
    return answer


def stop_coordinator() -> int:
    """Kill the workers, then the coordinator for good; returns the workers stopped."""
    handle = coordinator()
    stopped = 0
    try:
        stopped = int(ray.get(handle.shutdown.remote(), timeout=30)["workers_stopped"])
    finally:
        ray.kill(handle, no_restart=True)
    return stopped
