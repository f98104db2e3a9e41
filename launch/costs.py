"""Hourly cost of a declared stack at its minimum and maximum scale, from the resources the
program declares and a dated price table (`vocab/prices.json`, shared with the program's
`spotburst:maxHourlyUsd` refusal in `stacks/cost_ceiling.py`).

Minimum scale: every node pool at its `minSize`, or at the nodes the Ray pods that always run
need if that is more (each RayCluster's head, the `replicas` of a cluster without the Ray
autoscaler, the `minReplicas` of one with it), packed by CPU onto the pool's smallest type
(vCPUs from the account checks' table, `launch/account/instance_vcpus.json`).
Maximum scale: every pool at its `maxSize` (what the autoscaler may grow to). Fixed items —
control planes, NAT gateways, public IPv4 addresses, KMS keys, EC2 instances, ElastiCache
nodes (the inference cluster's GCS Redis) — are the same at both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from launch.account.scale import load_vcpu_table
from launch.offline import DeclaredResource
from vocab.prices import kms_key_hourly, load_price_table, node_price

__all__ = ["CostEstimate", "CostLine", "estimate_hourly_cost", "load_price_table"]
NODE_POOL_LABEL = "spotburst.io/node-pool"
NODE_RESERVED_CPU = 0.5
"""Kubelet reserve and daemon sets on every node: not available to pods."""


@dataclass(frozen=True)
class CostLine:
    item: str
    count_min: int
    count_max: int
    unit_price: float | None  # None: not in the price table

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

    @property
    def hourly_min(self) -> float:
        return sum(line.hourly_min for line in self.lines)

    @property
    def hourly_max(self) -> float:
        return sum(line.hourly_max for line in self.lines)

    @property
    def unpriced(self) -> list[str]:
        return [line.item for line in self.lines if line.unit_price is None]


def estimate_hourly_cost(resources: list[DeclaredResource], table: dict[str, Any]) -> CostEstimate:
    fixed = table["hourly"]
    lines: list[CostLine] = []

    def count(matches: Callable[[DeclaredResource], bool]) -> int:
        return sum(1 for resource in resources if matches(resource))

    counted = [
        ("EKS control plane", fixed["eks_control_plane"], _of_type("eks:index:Cluster")),
        ("NAT gateway", fixed["nat_gateway"], _of_type("aws:ec2/natGateway:NatGateway")),
        ("public IPv4 address", fixed["public_ipv4_address"], _holds_public_ipv4),
        ("KMS key", kms_key_hourly(table), _of_type("aws:kms/key:Key")),
    ]
    for item, price, matches in counted:
        if found := count(matches):
            lines.append(CostLine(item, found, found, price))
    always_on = _always_on_pods(resources)
    vcpus = load_vcpu_table()
    for resource in resources:
        if resource.type == "eks:index:ManagedNodeGroup":
            lines.append(_node_group_line(resource, table["instances"], vcpus, always_on))
        elif resource.type == "aws:ec2/instance:Instance":
            lines.append(_instance_line(resource, table["instances"]))
        elif resource.type == "aws:elasticache/replicationGroup:ReplicationGroup":
            lines.append(_cache_line(resource, table["elasticache"]))
    return CostEstimate(lines, table["date"], table["region"])


def _of_type(resource_type: str) -> Callable[[DeclaredResource], bool]:
    return lambda resource: resource.type == resource_type


def _holds_public_ipv4(resource: DeclaredResource) -> bool:
    if resource.type == "aws:ec2/eip:Eip":
        return True
    return resource.type == "aws:ec2/instance:Instance" and bool(
        resource.inputs.get("associatePublicIpAddress")
    )


def _cpus(quantity: Any) -> float:
    text = str(quantity)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def _always_on_pods(resources: list[DeclaredResource]) -> dict[str, list[float]]:
    """Node pool -> CPU requests of the Ray pods that run whatever the load."""
    pods: dict[str, list[float]] = {}

    def add(template: dict[str, Any], count: int) -> None:
        pod = template["spec"]
        pool = str((pod.get("nodeSelector") or {}).get(NODE_POOL_LABEL))
        cpu = _cpus(pod["containers"][0]["resources"]["requests"]["cpu"])
        pods.setdefault(pool, []).extend([cpu] * count)

    for resource in resources:
        if resource.type != "kubernetes:ray.io/v1:RayCluster":
            continue
        spec = resource.inputs["spec"]
        add(spec["headGroupSpec"]["template"], 1)
        key = "minReplicas" if spec.get("enableInTreeAutoscaling") else "replicas"
        for group in spec.get("workerGroupSpecs") or []:
            add(group["template"], int(group.get(key) or 0))
    return pods


def _nodes_for(pods: list[float], node_cpus: float) -> int:
    """First-fit decreasing: how many nodes of `node_cpus` allocatable CPUs hold the pods."""
    free: list[float] = []
    for cpu in sorted(pods, reverse=True):
        for index, room in enumerate(free):
            if cpu <= room:
                free[index] -= cpu
                break
        else:
            free.append(node_cpus - cpu)
    return len(free)


def _node_group_line(
    resource: DeclaredResource,
    prices: dict[str, Any],
    vcpus: dict[str, int],
    always_on: dict[str, list[float]],
) -> CostLine:
    inputs = resource.inputs
    market = "spot" if inputs.get("capacityType") == "SPOT" else "on_demand"
    types = list(inputs.get("instanceTypes") or [])
    scaling = inputs["scalingConfig"]
    low, high = int(scaling["minSize"]), int(scaling["maxSize"])
    pods = always_on.get(str((inputs.get("labels") or {}).get(NODE_POOL_LABEL)), [])
    if pods:
        sizes = [vcpus[name] for name in types if name in vcpus]
        # Unknown shapes: one pod per node.
        known = sizes and len(sizes) == len(types)
        room = min(sizes) - NODE_RESERVED_CPU if known else max(pods)
        low = min(high, max(low, _nodes_for(pods, room)))
    unit = node_price(prices, types, spot=market == "spot")
    label = "spot" if market == "spot" else "on-demand"
    return CostLine(
        f"{label} {'|'.join(types)} ({resource.name})",
        low,
        high,
        unit,
    )


def _instance_line(resource: DeclaredResource, prices: dict[str, Any]) -> CostLine:
    inputs = resource.inputs
    market = "spot" if inputs.get("instanceMarketOptions") else "on_demand"
    instance_type = inputs.get("instanceType", "?")
    unit = node_price(prices, [instance_type], spot=market == "spot")
    label = "spot" if market == "spot" else "on-demand"
    return CostLine(f"{label} {instance_type} ({resource.name})", 1, 1, unit)


def _cache_line(resource: DeclaredResource, prices: dict[str, float]) -> CostLine:
    """An ElastiCache replication group: each of its nodes billed on demand, always on."""
    node_type = str(resource.inputs.get("nodeType", "?"))
    nodes = int(resource.inputs.get("numCacheClusters") or 1)
    return CostLine(f"ElastiCache {node_type} ({resource.name})", nodes, nodes,
                    prices.get(node_type))
