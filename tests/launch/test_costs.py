"""The cost table by hand, on declared resources written out here (no stack program)."""

from __future__ import annotations

from typing import Any

import pytest

from launch.costs import estimate_hourly_cost, load_price_table
from launch.offline import DeclaredResource


def _resource(resource_type: str, name: str, **inputs: Any) -> DeclaredResource:
    return DeclaredResource(f"urn:{name}", f"{name}-id", resource_type, name, "", True, inputs, ())


TABLE = {
    "date": "2026-01-01",
    "region": "eu-west-1",
    "hourly": {"eks_control_plane": 0.1, "nat_gateway": 0.05, "public_ipv4_address": 0.01,
               "kms_key_month": 7.3},
    "instances": {"a.large": {"on_demand": 0.5, "spot": 0.2},
                  "b.large": {"on_demand": 0.7, "spot": 0.3}},
}


def test_instances_node_groups_and_addresses_by_hand() -> None:
    resources = [
        _resource("aws:ec2/instance:Instance", "od", instanceType="a.large",
                  associatePublicIpAddress=True),
        _resource("aws:ec2/instance:Instance", "sp", instanceType="b.large",
                  instanceMarketOptions={"marketType": "spot"}),
        _resource("aws:ec2/instance:Instance", "odd", instanceType="z.huge"),
        _resource("aws:ec2/eip:Eip", "ip"),
        _resource("aws:ec2/natGateway:NatGateway", "nat"),
        _resource("aws:kms/key:Key", "key"),
        _resource("eks:index:ManagedNodeGroup", "spot-pool", capacityType="SPOT",
                  instanceTypes=["a.large", "b.large"],
                  scalingConfig={"minSize": 1.0, "desiredSize": 3.0, "maxSize": 5.0}),
        _resource("eks:index:ManagedNodeGroup", "od-pool", instanceTypes=["b.large"],
                  scalingConfig={"minSize": 2.0, "desiredSize": 2.0, "maxSize": 2.0}),
    ]
    cost = estimate_hourly_cost(resources, TABLE)
    assert [(line.item, line.count_min, line.count_max) for line in cost.lines] == [
        ("NAT gateway", 1, 1),
        ("public IPv4 address", 2, 2),  # the EIP and the instance with a public address
        ("KMS key", 1, 1),
        ("on-demand a.large (od)", 1, 1),
        ("spot b.large (sp)", 1, 1),
        ("on-demand z.huge (odd)", 1, 1),
        ("spot a.large|b.large (spot-pool)", 1, 5),  # no Ray pods: minSize..maxSize
        ("on-demand b.large (od-pool)", 2, 2),
    ]
    # a KMS key $7.3 a month = $0.01 an hour; the spot pool at the mean of 0.2 and 0.3
    assert [line.unit_price or 0.0 for line in cost.lines] == pytest.approx(
        [0.05, 0.01, 0.01, 0.5, 0.3, 0.0, 0.25, 0.7])
    assert cost.lines[5].unit_price is None
    # 0.05 + 0.02 + 0.01 + 0.5 + 0.3 + 0 + 1 x 0.25 + 2 x 0.7; at max 5 x 0.25
    assert cost.hourly_min == pytest.approx(2.53)
    assert cost.hourly_max == pytest.approx(3.53)
    assert cost.unpriced == ["on-demand z.huge (odd)"]
    assert (cost.table_date, cost.table_region) == ("2026-01-01", "eu-west-1")
    assert estimate_hourly_cost([], TABLE).lines == []


def test_the_shipped_table_is_dated_and_has_the_fixed_prices() -> None:
    table = load_price_table()
    assert (table["date"], table["region"]) == ("2026-11-01", "us-east-1")
    assert {key: table["hourly"][key] for key in
            ("eks_control_plane", "nat_gateway", "public_ipv4_address")} == {
        "eks_control_plane": 0.10, "nat_gateway": 0.045, "public_ipv4_address": 0.005}


POOL = "spotburst.io/node-pool"


def _pod(pool: str, cpu: str) -> dict[str, Any]:
    return {"spec": {"nodeSelector": {POOL: pool},
                     "containers": [{"resources": {"requests": {"cpu": cpu}}}]}}


def _raycluster(autoscaling: bool) -> DeclaredResource:
    return _resource("kubernetes:ray.io/v1:RayCluster", "rc", spec={
        "enableInTreeAutoscaling": autoscaling,
        "headGroupSpec": {"template": _pod("head", "2")},
        "workerGroupSpecs": [{"replicas": 3.0, "minReplicas": 1.0,
                              "template": _pod("cpu", "1500m")}],
    })


def _pools() -> list[DeclaredResource]:
    return [
        _resource("eks:index:ManagedNodeGroup", "heads", instanceTypes=["m5.xlarge"],
                  labels={POOL: "head"}, scalingConfig={"minSize": 0.0, "maxSize": 3.0}),
        _resource("eks:index:ManagedNodeGroup", "cpus", capacityType="SPOT",
                  instanceTypes=["c5.xlarge"], labels={POOL: "cpu"},
                  scalingConfig={"minSize": 0.0, "maxSize": 10.0}),
    ]


POOL_TABLE = {**TABLE, "instances": {"m5.xlarge": {"on_demand": 0.2, "spot": 0.1},
                                     "c5.xlarge": {"on_demand": 0.2, "spot": 0.05}}}


def test_minimum_scale_packs_the_always_on_ray_pods_by_hand() -> None:
    # 4-vCPU nodes, 0.5 reserved: 3.5 CPUs each. The 2-CPU head: one head node. Three fixed
    # 1.5-CPU workers: 1.5 + 1.5 on one node (0.5 left), the third on a second node.
    fixed = estimate_hourly_cost([*_pools(), _raycluster(autoscaling=False)], POOL_TABLE)
    assert [(line.item, line.count_min, line.count_max) for line in fixed.lines] == [
        ("on-demand m5.xlarge (heads)", 1, 3), ("spot c5.xlarge (cpus)", 2, 10)]
    assert fixed.hourly_min == pytest.approx(1 * 0.2 + 2 * 0.05)
    assert fixed.hourly_max == pytest.approx(3 * 0.2 + 10 * 0.05)
    # with the Ray autoscaler only minReplicas (1) always run: one CPU node
    scaled = estimate_hourly_cost([*_pools(), _raycluster(autoscaling=True)], POOL_TABLE)
    assert [line.count_min for line in scaled.lines] == [1, 1]
