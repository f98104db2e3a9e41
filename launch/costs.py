"""Hourly cost of a declared stack at its minimum and maximum scale, from the resources the
program declares and a dated price table (`launch/prices.json`).

Minimum scale: every autoscaled node pool at its `minSize` (what an idle stack bills).
Maximum scale: every pool at its `maxSize` (what the autoscaler may grow to). Fixed items —
control planes, NAT gateways, public IPv4 addresses, KMS keys, EC2 instances — are the same
at both.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Any

from launch.offline import DeclaredResource

PRICE_TABLE = Path(__file__).with_name("prices.json")
HOURS_PER_MONTH = 730


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


def load_price_table(path: Path = PRICE_TABLE) -> dict[str, Any]:
    table: dict[str, Any] = json.loads(path.read_text())
    return table


def estimate_hourly_cost(resources: list[DeclaredResource], table: dict[str, Any]) -> CostEstimate:
    fixed = table["hourly"]
    lines: list[CostLine] = []

    def count(matches: Callable[[DeclaredResource], bool]) -> int:
        return sum(1 for resource in resources if matches(resource))

    counted = [
        ("EKS control plane", fixed["eks_control_plane"], _of_type("eks:index:Cluster")),
        ("NAT gateway", fixed["nat_gateway"], _of_type("aws:ec2/natGateway:NatGateway")),
        ("public IPv4 address", fixed["public_ipv4_address"], _holds_public_ipv4),
        ("KMS key", fixed["kms_key_month"] / HOURS_PER_MONTH, _of_type("aws:kms/key:Key")),
    ]
    for item, price, matches in counted:
        if found := count(matches):
            lines.append(CostLine(item, found, found, price))
    for resource in resources:
        if resource.type == "eks:index:ManagedNodeGroup":
            lines.append(_node_group_line(resource, table["instances"]))
        elif resource.type == "aws:ec2/instance:Instance":
            lines.append(_instance_line(resource, table["instances"]))
    return CostEstimate(lines, table["date"], table["region"])


def _of_type(resource_type: str) -> Callable[[DeclaredResource], bool]:
    return lambda resource: resource.type == resource_type


def _holds_public_ipv4(resource: DeclaredResource) -> bool:
    if resource.type == "aws:ec2/eip:Eip":
        return True
    return resource.type == "aws:ec2/instance:Instance" and bool(
        resource.inputs.get("associatePublicIpAddress")
    )


def _node_group_line(resource: DeclaredResource, prices: dict[str, Any]) -> CostLine:
    inputs = resource.inputs
    market = "spot" if inputs.get("capacityType") == "SPOT" else "on_demand"
    types = list(inputs.get("instanceTypes") or [])
    scaling = inputs["scalingConfig"]
    known = [prices[name][market] for name in types if name in prices]
    # Diversified spot capacity lands on any of the types: price it at their mean.
    unit = mean(known) if known and len(known) == len(types) else None
    label = "spot" if market == "spot" else "on-demand"
    return CostLine(
        f"{label} {'|'.join(types)} ({resource.name})",
        int(scaling["minSize"]),
        int(scaling["maxSize"]),
        unit,
    )


def _instance_line(resource: DeclaredResource, prices: dict[str, Any]) -> CostLine:
    inputs = resource.inputs
    market = "spot" if inputs.get("instanceMarketOptions") else "on_demand"
    instance_type = inputs.get("instanceType", "?")
    unit = prices.get(instance_type, {}).get(market)
    label = "spot" if market == "spot" else "on-demand"
    return CostLine(f"{label} {instance_type} ({resource.name})", 1, 1, unit)
