"""The validated stack config's types: frozen dataclasses, the experiments and the node pools.

`stacks/config.py` builds a `SpotburstConfig` from raw stack config and checks it; the stack
program (`stacks/program.py`), the cost estimate (`stacks/costs.py`) and the offline plan
read it. Nothing here reads config or imports Pulumi.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from components.raycluster_spec import (
    AUTOSCALER_CPU,
    AUTOSCALER_MEMORY,
    NOTICE_AGENT_CPU,
    NOTICE_AGENT_MEMORY,
)
from stacks.fields import GIB, quantity_amount
from vocab.spot import CAPACITY_ON_DEMAND, CAPACITY_SPOT, POOL_LEARNER, POOL_ON_DEMAND, POOL_SPOT

PROJECT = "spotburst"
RAY_ON_EKS = ("doll", "elastic", "rl", "inference")
"""Experiments that run as a RayCluster of their own on the shared EKS spot cluster."""
KNOWN_EXPERIMENTS = (*RAY_ON_EKS, "burst")
GCS_FAULT_TOLERANT = ("inference",)
"""Experiments whose RayCluster outlives its head (a long-running service, not a batch run):
their GCS keeps its state in a managed Redis."""
API_ENDPOINT_PRIVATE = "private"
API_ENDPOINT_PUBLIC = "public"


@dataclass(frozen=True)
class NodePoolKind:
    """A node pool the spot cluster can have: how it is bought and whether it has GPUs."""

    key: str
    name: str
    """The pool's name on AWS and in the `spotburst.io/node-pool` node label."""
    capacity: str
    gpu: bool
    min_instance_types: int
    ray_pool: str
    """The spot vocabulary's pool of a Ray worker here (its Ray node labels)."""


NODE_POOLS = {
    pool.key: pool
    for pool in (
        NodePoolKind("head", "head", CAPACITY_ON_DEMAND, False, 1, POOL_ON_DEMAND),
        NodePoolKind("spotCpu", "spot-cpu", CAPACITY_SPOT, False, 2, POOL_SPOT),
        NodePoolKind("learnerGpu", "learner-gpu", CAPACITY_ON_DEMAND, True, 1, POOL_LEARNER),
        NodePoolKind("spotGpu", "spot-gpu", CAPACITY_SPOT, True, 1, POOL_SPOT),
    )
}
HEAD_POOL = "head"


@dataclass(frozen=True)
class NodePoolConfig:
    kind: NodePoolKind
    instance_types: tuple[str, ...]
    min_size: int
    max_size: int


@dataclass(frozen=True)
class PodResources:
    cpu: str
    memory: str
    """Kubernetes quantities, as given (requests = limits)."""

    @property
    def cpus(self) -> float:
        return quantity_amount(self.cpu)

    @property
    def memory_gib(self) -> float:
        return quantity_amount(self.memory) / GIB


@dataclass(frozen=True)
class PodRequest:
    """What one Ray pod asks of its node, all its containers together."""

    key: str
    """Where the request is configured, e.g. "doll.workerGroups[0]"."""
    node_pool: str
    cpus: float
    memory_gib: float
    gpus: int
    always_on: int
    """How many such pods run whatever the load."""


@dataclass(frozen=True)
class WorkerGroupConfig:
    name: str
    node_pool: str
    resources: PodResources
    gpu: int
    placement: tuple[tuple[str, float], ...]
    """Custom Ray resources the group's nodes advertise, e.g. (("spot", 3.0),)."""
    min_replicas: int
    replicas: int
    max_replicas: int


@dataclass(frozen=True)
class RayClusterConfig:
    experiment: str
    namespace: str
    ray_autoscaler: bool
    head: PodResources
    worker_groups: tuple[WorkerGroupConfig, ...]

    def pods(self) -> list[PodRequest]:
        """The head pod (with the Ray autoscaler's container when it is on), then one
        request per worker group (with the notice agent's container on a spot pool). Always
        on: the head, the `replicas` of each group without the Ray autoscaler, the
        `minReplicas` with it (it sizes the group from there)."""
        autoscaler = PodResources(AUTOSCALER_CPU, AUTOSCALER_MEMORY)
        agent = PodResources(NOTICE_AGENT_CPU, NOTICE_AGENT_MEMORY)
        beside = [autoscaler] if self.ray_autoscaler else []
        head = [self.head, *beside]
        pods = [
            PodRequest(
                f"{self.experiment}.head",
                HEAD_POOL,
                sum(part.cpus for part in head),
                sum(part.memory_gib for part in head),
                0,
                1,
            )
        ]
        for index, group in enumerate(self.worker_groups):
            parts = [group.resources]
            if NODE_POOLS[group.node_pool].capacity == CAPACITY_SPOT:
                parts.append(agent)
            pods.append(
                PodRequest(
                    f"{self.experiment}.workerGroups[{index}]",
                    group.node_pool,
                    # millicores and MiB, exactly: 1.65 + 0.1 is not 1.75 in floats
                    round(sum(part.cpus for part in parts), 3),
                    round(sum(part.memory_gib for part in parts), 6),
                    group.gpu,
                    group.min_replicas if self.ray_autoscaler else group.replicas,
                )
            )
        return pods


@dataclass(frozen=True)
class SharedStorageConfig:
    """The stack's shared EFS file system, mounted in every Ray pod."""

    throughput_mode: str
    infrequent_access_after_days: int | None
    """None: files stay in Standard storage however long they go untouched."""


@dataclass(frozen=True)
class SpotClusterConfig:
    vpc_cidr: str
    az_count: int
    eks_version: str
    kuberay_version: str
    cluster_autoscaler_version: str
    cluster_autoscaler_chart: str
    nvidia_device_plugin_version: str
    node_pools: dict[str, NodePoolConfig]
    drain_on_rebalance: bool = False
    """The notice agents in spot pods drain their Ray node at a rebalance recommendation
    too (not only at the interruption notice)."""
    shared_storage: SharedStorageConfig | None = SharedStorageConfig("elastic", 30)
    """None: `sharedStorage: none`, no shared file system."""

    def used_pools(self, ray_clusters: Mapping[str, RayClusterConfig]) -> list[NodePoolConfig]:
        """The head pool and every pool a worker group of an enabled experiment runs on."""
        used = {HEAD_POOL} | {
            group.node_pool for cluster in ray_clusters.values() for group in cluster.worker_groups
        }
        return [pool for key, pool in self.node_pools.items() if key in used]


@dataclass(frozen=True)
class BurstConfig:
    onprem_cidr: str
    cloud_cidr: str
    instance_type: str
    login_nodes: int
    hpc_workers: int
    cloud_nodes: int
    login_disk_gb: int
    worker_disk_gb: int


@dataclass(frozen=True)
class BucketConfig:
    force_destroy: bool
    versioning: bool
    expire_results_after_days: int


@dataclass(frozen=True)
class SpotburstConfig:
    stack: str
    region: str
    experiments: tuple[str, ...]
    admin_cidrs: tuple[str, ...]
    allow_world_admin_access: bool
    api_endpoint: str
    """public (reachable from admin_cidrs) or private (the deployer runs inside the VPC)."""
    max_hourly_usd: float | None
    """Refuse the stack when its maximum-scale cost per hour is above this."""
    bucket: BucketConfig
    spot_cluster: SpotClusterConfig | None
    """None when no experiment runs on EKS."""
    ray_clusters: dict[str, RayClusterConfig]
    """One per enabled EKS experiment, in the order of `experiments`."""
    burst: BurstConfig | None
    ray_version: str
    ray_image: str
    node_packages: tuple[str, ...]

    @property
    def name_prefix(self) -> str:
        return f"{PROJECT}-{self.stack}"
