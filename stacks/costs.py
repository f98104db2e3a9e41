"""The stack's hourly cost at minimum and maximum scale, counted in one place, from its
validated config: the program refuses a stack above `spotburst:maxHourlyUsd` with it before
declaring anything, and `invoke plan` and `invoke up`'s budget prompt print it.

It counts what the program declares (tests/infra/test_deploy_guards.py holds the count
against the resources of offline runs): the spot cluster's EKS control plane, NAT gateway
with its Elastic IP, secrets KMS key, every used node pool and the GCS Redis nodes of the
fault-tolerant RayClusters; the burst sites' NAT gateway with its Elastic IP (the on-prem
private subnet), Ray token KMS key and on-demand instances, the login and cloud nodes with a
public IPv4 address each.

The spot cluster's shared EFS file system has no hourly charge (its line is $0/h): it is
billed per GB-month stored and, in elastic throughput mode, per GB read and written; the
estimate says so with the table's prices (`per_gb`), which no hourly total can include.

Maximum scale: every node pool at its `maxSize` (what the Cluster Autoscaler may grow it to).
Minimum scale: every pool at its `minSize`, or at the nodes the Ray pods that always run need
if that is more (`RayClusterConfig.pods`), packed by CPU onto the pool's smallest type
(`vocab/instances.py`). Everything else is the same at both. Prices: `vocab/prices.py`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from components.gcs_redis import NODE_COUNT as REDIS_NODES
from components.gcs_redis import NODE_TYPE as REDIS_NODE_TYPE
from stacks.config_types import (
    GCS_FAULT_TOLERANT,
    PROJECT,
    NodePoolConfig,
    SharedStorageConfig,
    SpotburstConfig,
)
from stacks.fields import ConfigError
from vocab.instances import InstanceShape, load_instance_shapes
from vocab.prices import kms_key_hourly, load_price_table, node_price
from vocab.spot import CAPACITY_SPOT

MAX_HOURLY_KEY = f"{PROJECT}:maxHourlyUsd"


@dataclass(frozen=True)
class CostLine:
    item: str
    count_min: int
    count_max: int
    unit_price: float | None
    """$/h of one; None: not in the price table."""
    priced_as: str
    """What the price table must hold to price it, e.g. "c5.xlarge|c5a.xlarge"."""

    @property
    def hourly_min(self) -> float:
        return self.count_min * (self.unit_price or 0.0)

    @property
    def hourly_max(self) -> float:
        return self.count_max * (self.unit_price or 0.0)


@dataclass(frozen=True)
class CostEstimate:
    lines: list[CostLine]
    table_date: str
    table_region: str
    per_gb: list[str] = field(default_factory=list)
    """What is billed by the data, not the hour (one sentence each, with its prices)."""

    @property
    def hourly_min(self) -> float:
        return sum(line.hourly_min for line in self.lines)

    @property
    def hourly_max(self) -> float:
        return sum(line.hourly_max for line in self.lines)

    @property
    def unpriced(self) -> list[str]:
        return [line.item for line in self.lines if line.unit_price is None]


def hourly_cost(
    config: SpotburstConfig,
    table: Mapping[str, Any],
    shapes: Mapping[str, InstanceShape] | None = None,
) -> CostEstimate:
    """Every billed item of the stack with its count at minimum and maximum scale."""
    shapes = load_instance_shapes() if shapes is None else shapes
    fixed = table["hourly"]
    on_eks = config.spot_cluster is not None and bool(config.ray_clusters)
    burst = config.burst if "burst" in config.experiments else None
    # The spot cluster and the burst sites each have one NAT gateway (with an Elastic IP)
    # and one KMS key (the EKS secrets' key, the burst Ray token's).
    sites = int(on_eks) + int(burst is not None)
    public_nodes = burst.login_nodes + burst.cloud_nodes if burst is not None else 0
    counted = [
        ("EKS control plane", fixed["eks_control_plane"], int(on_eks)),
        ("NAT gateway", fixed["nat_gateway"], sites),
        ("public IPv4 address", fixed["public_ipv4_address"], sites + public_nodes),
        ("KMS key", kms_key_hourly(table), sites),
    ]
    lines = [CostLine(item, n, n, price, item) for item, price, n in counted if n]
    if on_eks:
        assert config.spot_cluster is not None
        always_on = _always_on_cpus(config)
        for pool in config.spot_cluster.used_pools(config.ray_clusters):
            lines.append(_pool_line(pool, table["instances"], shapes, always_on))
        for experiment in config.ray_clusters:
            if experiment in GCS_FAULT_TOLERANT:
                lines.append(
                    CostLine(
                        f"ElastiCache {REDIS_NODE_TYPE} ({experiment} GCS Redis)",
                        REDIS_NODES,
                        REDIS_NODES,
                        table["elasticache"].get(REDIS_NODE_TYPE),
                        f"ElastiCache {REDIS_NODE_TYPE}",
                    )
                )
    per_gb = []
    if on_eks and config.spot_cluster is not None and config.spot_cluster.shared_storage:
        shared = config.spot_cluster.shared_storage
        lines.append(CostLine(SHARED_STORAGE_ITEM, 1, 1, 0.0, SHARED_STORAGE_ITEM))
        per_gb.append(shared_storage_prices(shared, table))
    if burst is not None:
        price = node_price(table["instances"], [burst.instance_type], spot=False)
        for role, count in (
            ("login node", burst.login_nodes),
            ("HPC workers", burst.hpc_workers),
            ("cloud nodes", burst.cloud_nodes),
        ):
            if count:
                item = f"on-demand {burst.instance_type} (burst {role})"
                lines.append(CostLine(item, count, count, price, burst.instance_type))
    return CostEstimate(lines, str(table["date"]), str(table["region"]), per_gb)


SHARED_STORAGE_ITEM = "EFS shared file system (no hourly charge; billed per GB)"


def shared_storage_prices(shared: SharedStorageConfig, table: Mapping[str, Any]) -> str:
    """The shared file system's prices per GB, as the stack's config uses it."""
    efs = table["efs"]
    text = f"EFS shared data: ${efs['standard_gb_month']:.2f} per GB-month stored"
    if shared.infrequent_access_after_days is not None:
        text += (
            f" (${efs['infrequent_access_gb_month']:.3f} per GB-month for files untouched "
            f"{shared.infrequent_access_after_days} days, ${efs['infrequent_access_read_gb']:.2f}"
            " per GB read from them)"
        )
    if shared.throughput_mode == "elastic":
        text += (
            f"; elastic throughput ${efs['elastic_read_gb']:.2f} per GB read, "
            f"${efs['elastic_write_gb']:.2f} per GB written"
        )
    else:
        text += "; bursting throughput: no transfer charge"
    return text + f" (prices of {table.get('efs_date', table['date'])})"


def refuse_over_budget(config: SpotburstConfig) -> None:
    """Raise ConfigError when the stack may cost more per hour than maxHourlyUsd allows, or
    when the limit is set and an item cannot be priced."""
    if config.max_hourly_usd is None:
        return
    cost = hourly_cost(config, load_price_table())
    for line in cost.lines:
        if line.unit_price is None:
            raise ConfigError(
                f"{MAX_HOURLY_KEY}: cannot price {line.priced_as}; add it to vocab/prices.json "
                "or remove maxHourlyUsd"
            )
    if cost.hourly_max > config.max_hourly_usd:
        enough = math.ceil(cost.hourly_max * 100) / 100
        raise ConfigError(
            f"{MAX_HOURLY_KEY}: the stack costs up to ${cost.hourly_max:.2f} per hour at maximum "
            f"scale (every node pool at maxSize), above the ${config.max_hourly_usd:.2f} "
            "allowed; lower the pools' maxSize or raise the limit: "
            f"pulumi config set {MAX_HOURLY_KEY} {enough:.2f}"
        )


def _always_on_cpus(config: SpotburstConfig) -> dict[str, list[float]]:
    """Node pool key -> CPU requests of the Ray pods that run whatever the load."""
    pods: dict[str, list[float]] = {}
    for cluster in config.ray_clusters.values():
        for pod in cluster.pods():
            pods.setdefault(pod.node_pool, []).extend([pod.cpus] * pod.always_on)
    return pods


def _nodes_for(pods: list[float], node_cpus: float) -> int:
    """First-fit decreasing: how many nodes of `node_cpus` CPUs for pods hold the pods."""
    free: list[float] = []
    for cpu in sorted(pods, reverse=True):
        for index, room in enumerate(free):
            if cpu <= room:
                free[index] -= cpu
                break
        else:
            free.append(node_cpus - cpu)
    return len(free)


def _pool_line(
    pool: NodePoolConfig,
    prices: Mapping[str, Any],
    shapes: Mapping[str, InstanceShape],
    always_on: Mapping[str, list[float]],
) -> CostLine:
    spot = pool.kind.capacity == CAPACITY_SPOT
    low = pool.min_size
    pods = always_on.get(pool.kind.key, [])
    if pods:
        room = min(shapes[name].pod_cpus for name in pool.instance_types)
        low = min(pool.max_size, max(low, _nodes_for(pods, room)))
    types = "|".join(pool.instance_types)
    return CostLine(
        f"{'spot' if spot else 'on-demand'} {types} (pool {pool.kind.name})",
        low,
        pool.max_size,
        node_price(prices, pool.instance_types, spot),
        types,
    )
