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
        _resource("eks:index:Cluster", "cluster"),
        _resource("aws:kms/key:Key", "key"),
        _resource("eks:index:ManagedNodeGroup", "spot-pool", capacityType="SPOT",
                  instanceTypes=["a.large", "b.large"],
                  scalingConfig={"minSize": 1.0, "desiredSize": 3.0, "maxSize": 5.0}),
        _resource("eks:index:ManagedNodeGroup", "od-pool", instanceTypes=["b.large"],
                  scalingConfig={"minSize": 2.0, "desiredSize": 2.0, "maxSize": 2.0}),
    ]
    cost = estimate_hourly_cost(resources, TABLE)
    assert [(line.item, line.count_min, line.count_max) for line in cost.lines] == [
        ("EKS control plane", 1, 1),
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
        [0.1, 0.05, 0.01, 0.01, 0.5, 0.3, 0.0, 0.25, 0.7])
    assert cost.lines[6].unit_price is None
    # 0.1 + 0.05 + 0.02 + 0.01 + 0.5 + 0.3 + 0 + 1 x 0.25 + 2 x 0.7; at max 5 x 0.25
    assert cost.hourly_min == pytest.approx(2.63)
    assert cost.hourly_max == pytest.approx(3.63)
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


def test_an_instance_without_a_type_is_listed_unpriced_as_unknown() -> None:
    # an instance whose type comes from a launch template declares none itself
    cost = estimate_hourly_cost([_resource("aws:ec2/instance:Instance", "lt")], TABLE)
    assert [(line.item, line.count_min, line.unit_price) for line in cost.lines] == [
        ("on-demand ? (lt)", 1, None)]
    assert cost.unpriced == ["on-demand ? (lt)"]


def _cpu_pool(name: str, instance_types: list[str]) -> DeclaredResource:
    return _resource("eks:index:ManagedNodeGroup", name, capacityType="SPOT",
                     instanceTypes=instance_types, labels={POOL: name},
                     scalingConfig={"minSize": 0.0, "maxSize": 10.0})


def _fixed_workers(*groups: tuple[str, int, str]) -> DeclaredResource:
    """A RayCluster without the Ray autoscaler: (pool, replicas, CPU request) per group."""
    return _resource("kubernetes:ray.io/v1:RayCluster", "rc", spec={
        "headGroupSpec": {"template": _pod("head", "1")},
        "workerGroupSpecs": [{"replicas": float(count), "template": _pod(pool, cpu)}
                             for pool, count, cpu in groups],
    })


def _minimum(resources: list[DeclaredResource]) -> dict[str, int]:
    """Pool name -> its nodes at minimum scale."""
    lines = estimate_hourly_cost(resources, POOL_TABLE).lines
    return {line.item.rsplit("(", 1)[1].rstrip(")"): line.count_min for line in lines}


def test_the_largest_pods_are_placed_first() -> None:
    # 3.5 CPUs a node. Largest first: 2 | 2, then a 1 beside each: two nodes. Smallest first
    # would put 1 + 1 together and need a node for each 2: three.
    pods = _fixed_workers(("cpu", 2, "1000m"), ("cpu", 2, "2"))
    assert _minimum([_cpu_pool("cpu", ["c5.xlarge"]), pods]) == {"cpu": 2}


def test_pods_that_fill_a_node_exactly_share_it_and_one_millicore_more_do_not() -> None:
    pods = _fixed_workers(("exact", 2, "1750m"), ("over", 2, "1751m"))
    pools = [_cpu_pool("exact", ["c5.xlarge"]), _cpu_pool("over", ["c5.xlarge"])]
    assert _minimum([*pools, pods]) == {"exact": 1, "over": 2}


def test_unknown_shapes_hold_one_pod_per_node() -> None:
    # c5.xlarge would hold two 1.5-CPU pods; a pool that may also get a shape the vCPU table
    # does not know cannot count on that, nor can a pool of unknown shapes only.
    pods = _fixed_workers(("mixed", 3, "1500m"), ("unknown", 3, "1500m"))
    pools = [_cpu_pool("mixed", ["c5.xlarge", "z.unknown"]), _cpu_pool("unknown", ["z.unknown"])]
    assert _minimum([*pools, pods]) == {"mixed": 3, "unknown": 3}


def test_an_autoscaled_worker_group_without_min_replicas_keeps_no_node() -> None:
    cluster = _resource("kubernetes:ray.io/v1:RayCluster", "rc", spec={
        "enableInTreeAutoscaling": True,
        "headGroupSpec": {"template": _pod("head", "1")},
        "workerGroupSpecs": [{"replicas": 2.0, "template": _pod("cpu", "1")},
                             {"minReplicas": 0.0, "replicas": 2.0, "template": _pod("cpu", "1")}],
    })
    assert _minimum([_cpu_pool("cpu", ["c5.xlarge"]), cluster]) == {"cpu": 0}
