"""What a stack needs from the account's Service Quotas at its maximum scale.

`StackScale` describes the stack at maximum scale (node pools with their maximum counts,
VPCs, Elastic IPs, NAT gateways); `required_quotas` turns it into an amount per quota, a
pure function. `scale_from_plan` derives the scale from the resources the offline plan
declares. vCPUs per instance type come from the dated `vocab/instances.json`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from launch.offline import DeclaredResource
from vocab.instances import load_instance_shapes
from vocab.spot import CAPACITY_ON_DEMAND, CAPACITY_SPOT


class Capacity(Enum):
    """How a pool's instances are bought: the spot cluster's capacity label values."""

    ON_DEMAND = CAPACITY_ON_DEMAND
    SPOT = CAPACITY_SPOT


@dataclass(frozen=True)
class NodePoolScale:
    """Instances that may run at once: a node group at its maxSize, or one instance."""

    name: str
    instance_types: tuple[str, ...]
    capacity: Capacity
    max_count: int


@dataclass(frozen=True)
class StackScale:
    pools: tuple[NodePoolScale, ...]
    vpcs: int
    elastic_ips: int
    nat_gateways_per_az: int  # the most NAT gateways in any one Availability Zone
    unsized: tuple[str, ...] = ()  # resources that launch instances this module cannot size


@dataclass(frozen=True)
class Quota:
    service_code: str
    quota_code: str
    label: str  # what the preflight calls it
    aws_name: str  # what the Service Quotas console calls it


ON_DEMAND_STANDARD = Quota(
    "ec2",
    "L-1216C47A",
    "on-demand standard vCPUs",
    "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
)
SPOT_STANDARD = Quota(
    "ec2",
    "L-34B43A08",
    "spot standard vCPUs",
    "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
)
ON_DEMAND_GVT = Quota(
    "ec2", "L-DB2E81BA", "on-demand G/VT vCPUs", "Running On-Demand G and VT instances"
)
SPOT_GVT = Quota("ec2", "L-3819A6DF", "spot G/VT vCPUs", "All G and VT Spot Instance Requests")
VPCS = Quota("vpc", "L-F678F1CE", "VPCs per region", "VPCs per Region")
ELASTIC_IPS = Quota("ec2", "L-0263D0A3", "Elastic IPs", "EC2-VPC Elastic IPs")
NAT_GATEWAYS = Quota(
    "vpc", "L-FE5A380F", "NAT gateways per Availability Zone", "NAT gateways per Availability Zone"
)

_VCPU_QUOTAS = {
    ("standard", Capacity.ON_DEMAND): ON_DEMAND_STANDARD,
    ("standard", Capacity.SPOT): SPOT_STANDARD,
    ("gvt", Capacity.ON_DEMAND): ON_DEMAND_GVT,
    ("gvt", Capacity.SPOT): SPOT_GVT,
}
# Families with quotas of their own, checked before the first-letter rule (hpc6a is not H).
_OTHER_FAMILIES = ("inf", "trn", "dl", "hpc", "mac", "u-", "p", "f", "x")
_STANDARD_LETTERS = "acdhimrtz"


@dataclass(frozen=True)
class QuotaNeed:
    quota: Quota
    amount: int
    basis: str  # how the amount was reached, e.g. "doll-ray-workers 16 x 4 vCPUs"


def load_vcpu_table() -> dict[str, int]:
    return {name: shape.vcpus for name, shape in load_instance_shapes().items()}


def vcpu_family(instance_type: str) -> str:
    """"standard", "gvt" (G and VT) or "other": which family of vCPU quotas counts the type."""
    family = instance_type.split(".", 1)[0].lower()
    if family.startswith("vt") or family.startswith("g"):
        return "gvt"
    if family.startswith(_OTHER_FAMILIES):
        return "other"
    return "standard" if family[:1] in _STANDARD_LETTERS else "other"


def vcpu_quota(instance_type: str, capacity: Capacity) -> Quota | None:
    """The vCPU quota an instance of this type counts against (None: one not checked here)."""
    return _VCPU_QUOTAS.get((vcpu_family(instance_type), capacity))


def instance_types_of(scale: StackScale) -> set[str]:
    return {name for pool in scale.pools for name in pool.instance_types}


def required_quotas(scale: StackScale, vcpus: Mapping[str, int]) -> list[QuotaNeed]:
    """The amount of each quota the stack needs at maximum scale (quotas it needs none of are
    left out). A pool of several types may get any of them: it counts at its largest type.
    Raises ValueError naming an instance type missing from `vcpus` or outside the
    standard and G/VT families."""
    totals: Counter[Quota] = Counter()
    bases: dict[Quota, list[str]] = {}
    for pool in scale.pools:
        if pool.max_count <= 0:
            continue
        missing = [name for name in pool.instance_types if name not in vcpus]
        if missing:
            raise ValueError(f"{pool.name}: no vCPU count for instance type {missing[0]}")
        families = {vcpu_family(name) for name in pool.instance_types}
        if families - {"standard", "gvt"} or len(families) != 1:
            raise ValueError(
                f"{pool.name}: instance types {', '.join(pool.instance_types)} are not all in one "
                "of the families the preflight checks (standard A/C/D/H/I/M/R/T/Z, or G/VT)"
            )
        quota = _VCPU_QUOTAS[(families.pop(), pool.capacity)]
        per_node = max(vcpus[name] for name in pool.instance_types)
        totals[quota] += pool.max_count * per_node
        bases.setdefault(quota, []).append(f"{pool.name} {pool.max_count} x {per_node}")
    needs = [
        QuotaNeed(quota, totals[quota], " + ".join(bases[quota]) + " vCPUs")
        for quota in (ON_DEMAND_STANDARD, SPOT_STANDARD, ON_DEMAND_GVT, SPOT_GVT)
        if totals[quota]
    ]
    for quota, amount, basis in (
        (VPCS, scale.vpcs, "VPCs the stack declares"),
        (ELASTIC_IPS, scale.elastic_ips, "Elastic IPs the stack declares"),
        (NAT_GATEWAYS, scale.nat_gateways_per_az, "NAT gateways in one zone"),
    ):
        if amount:
            needs.append(QuotaNeed(quota, amount, basis))
    return needs


# --- the scale of a planned stack -----------------------------------------------------------

_INSTANCE_LAUNCHERS = (
    "aws:autoscaling/group:Group",
    "aws:ec2/fleet:Fleet",
    "aws:ec2/spotFleetRequest:SpotFleetRequest",
    "aws:ec2/spotInstanceRequest:SpotInstanceRequest",
    "eks:index:NodeGroup",
    "eks:index:NodeGroupV2",
    "kubernetes:karpenter.sh/v1:NodePool",
)
# pulumi-eks's own default node group when skipDefaultNodeGroup is not set.
_EKS_DEFAULT_NODE_GROUP = NodePoolScale("", ("t3.medium",), Capacity.ON_DEMAND, 2)


def scale_from_plan(resources: Iterable[DeclaredResource]) -> StackScale:
    """The maximum scale of the resources an offline plan declares (`launch.plan.plan`)."""
    declared = list(resources)
    pools: list[NodePoolScale] = []
    unsized: list[str] = []
    for resource in declared:
        inputs = resource.inputs
        if resource.type in ("eks:index:ManagedNodeGroup", "aws:eks/nodeGroup:NodeGroup"):
            capacity = Capacity.SPOT if inputs.get("capacityType") == "SPOT" else Capacity.ON_DEMAND
            types = tuple(inputs.get("instanceTypes") or ("t3.medium",))  # the EKS default
            maximum = int(inputs["scalingConfig"]["maxSize"])
            pools.append(NodePoolScale(resource.name, types, capacity, maximum))
        elif resource.type == "aws:ec2/instance:Instance":
            capacity = Capacity.SPOT if inputs.get("instanceMarketOptions") else Capacity.ON_DEMAND
            pools.append(NodePoolScale(resource.name, (inputs["instanceType"],), capacity, 1))
        elif resource.type == "eks:index:Cluster" and not inputs.get("skipDefaultNodeGroup"):
            default = _EKS_DEFAULT_NODE_GROUP
            pools.append(
                NodePoolScale(
                    f"{resource.name} default node group",
                    (inputs.get("instanceType") or default.instance_types[0],),
                    default.capacity,
                    int(inputs.get("maxSize") or default.max_count),
                )
            )
        elif resource.type in _INSTANCE_LAUNCHERS:
            unsized.append(f"{resource.type} {resource.name}")
    return StackScale(
        pools=tuple(pools),
        vpcs=sum(1 for r in declared if r.type in ("aws:ec2/vpc:Vpc", "awsx:ec2:Vpc")),
        elastic_ips=sum(1 for r in declared if r.type == "aws:ec2/eip:Eip"),
        nat_gateways_per_az=_most_nat_gateways_in_one_zone(declared),
        unsized=tuple(unsized),
    )


def _most_nat_gateways_in_one_zone(declared: list[DeclaredResource]) -> int:
    zone_of_subnet = {
        r.resource_id: r.inputs.get("availabilityZone")
        for r in declared
        if r.type == "aws:ec2/subnet:Subnet"
    }
    zones: Counter[str] = Counter()
    unknown = 0  # gateways whose zone the plan cannot tell: the worst case, all in the fullest
    for resource in declared:
        if resource.type == "aws:ec2/natGateway:NatGateway":
            zone = zone_of_subnet.get(str(resource.inputs.get("subnetId")))
            if zone:
                zones[zone] += 1
            else:
                unknown += 1
    return max(zones.values(), default=0) + unknown


def cluster_names_from_plan(resources: Iterable[DeclaredResource]) -> list[str]:
    """The EKS cluster names a planned stack declares (for the leftover listing)."""
    names = []
    for resource in resources:
        if resource.type in ("eks:index:Cluster", "aws:eks/cluster:Cluster"):
            names.append(str(resource.inputs.get("name") or resource.name))
    return names


def uses_eks(resources: Iterable[DeclaredResource]) -> bool:
    return bool(cluster_names_from_plan(resources))
