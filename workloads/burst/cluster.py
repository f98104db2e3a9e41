"""The Ray nodes a run can use, read from the cluster: site, role, CPUs, compute slots."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ray

from vocab.burst import LABEL_ROLE, LABEL_SITE, ROLE_LOGIN, TRANSFER_RESOURCE
from workloads.common.options import OptionError


@dataclass(frozen=True)
class NodeInfo:
    node_id: str
    site: str
    role: str
    cpus: int
    ip: str

    @property
    def is_worker(self) -> bool:
        """Non-head nodes carry the transfer slot and run the tasks."""
        return self.role != ROLE_LOGIN


def describe(raw: dict[str, Any]) -> NodeInfo:
    labels = raw.get("Labels") or {}
    resources = raw.get("Resources") or {}
    role = labels.get(LABEL_ROLE) or ("hpc" if TRANSFER_RESOURCE in resources else ROLE_LOGIN)
    return NodeInfo(
        node_id=raw["NodeID"],
        site=labels.get(LABEL_SITE, "onprem"),
        role=role,
        cpus=int(resources.get("CPU", 0)),
        ip=raw.get("NodeManagerAddress", ""),
    )


def alive_nodes() -> list[NodeInfo]:
    return [describe(raw) for raw in ray.nodes() if raw.get("Alive")]


def alive_ids() -> set[str]:
    return {node.node_id for node in alive_nodes()}


def head_node(nodes: list[NodeInfo]) -> NodeInfo:
    """The login node (the head); the first on-prem node when no node says it is."""
    for node in nodes:
        if node.role == ROLE_LOGIN:
            return node
    return next(node for node in nodes if node.site == "onprem")


def task_cpus(nodes: list[NodeInfo], requested: int | None) -> int:
    """CPUs per task: as asked, else the smallest worker node's CPUs (one task per node).
    Every worker node must hold one: each computes in the calibration, and Ray fails a task
    pinned to a node too small for it (the launcher checks a lab's sizes before it starts)."""
    workers = [node for node in nodes if node.is_worker]
    if not workers:
        raise RuntimeError(
            "the cluster has no worker node (a node with the "
            f"{TRANSFER_RESOURCE} resource): nothing can run the tasks"
        )
    cpus = requested or min(node.cpus for node in workers)
    if any(node.cpus < cpus for node in workers):
        raise OptionError(
            "--task-cpus", f"{cpus} CPUs per task, more than a worker node has "
            f"({', '.join(f'{n.role} {n.cpus}' for n in workers)})"
        )
    return cpus
