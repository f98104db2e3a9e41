"""The hourly cost from a stack's config, by hand, with a price table written out here."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from launch.stack_config import read_stack_config
from stacks.config import parse_config, with_admin_cidr_placeholder
from stacks.config_types import SpotburstConfig
from stacks.costs import CostEstimate, hourly_cost
from vocab.prices import load_price_table

TABLE = {
    "date": "2026-01-01",
    "region": "eu-west-1",
    "hourly": {"eks_control_plane": 0.1, "nat_gateway": 0.05, "public_ipv4_address": 0.01,
               "kms_key_month": 7.3},
    "instances": {"m5.xlarge": {"on_demand": 0.2, "spot": 0.1},
                  "c5.xlarge": {"on_demand": 0.2, "spot": 0.05},
                  "c5a.xlarge": {"on_demand": 0.2, "spot": 0.03},
                  "r5.xlarge": {"on_demand": 0.5, "spot": 0.2}},
    "elasticache": {},
    "efs": {"standard_gb_month": 0.3, "infrequent_access_gb_month": 0.02,
            "infrequent_access_read_gb": 0.01, "elastic_read_gb": 0.03, "elastic_write_gb": 0.06},
}
CPU_POOL = ["c5.xlarge", "c5a.xlarge"]  # 4 vCPUs each: 3.5 CPUs for pods


def _config(
    workers: list[dict[str, Any]],
    experiments: tuple[str, ...] = ("doll",),
    autoscaler: bool = False,
    burst: dict[str, Any] | None = None,
) -> SpotburstConfig:
    """The dev config with DOLL's worker groups on the spot CPU pool (4-vCPU types) replaced,
    a 4-vCPU head pool, and `burst` changes."""
    raw = with_admin_cidr_placeholder(read_stack_config("dev"))[0]
    spot = json.loads(raw["spotburst:spotCluster"])
    spot["nodePools"]["head"] = {"instanceTypes": ["m5.xlarge"], "minSize": 1, "maxSize": 3}
    spot["nodePools"]["spotCpu"] = {"instanceTypes": CPU_POOL, "minSize": 0, "maxSize": 10}
    doll = json.loads(raw["spotburst:doll"])
    doll["rayAutoscaler"] = autoscaler
    doll["workerGroups"] = [
        {"name": f"group-{index}", "nodePool": "spotCpu", "memory": "2Gi", "gpu": 0,
         "resources": {"spot": 1}, "minReplicas": 0, "maxReplicas": 8, **group}
        for index, group in enumerate(workers)
    ]
    changed = {
        **raw,
        "spotburst:experiments": json.dumps(list(experiments)),
        "spotburst:spotCluster": json.dumps(spot),
        "spotburst:doll": json.dumps(doll),
        "spotburst:burst": json.dumps({**json.loads(raw["spotburst:burst"]), **(burst or {})}),
    }
    return parse_config(changed, "dev")


def _rows(cost: CostEstimate) -> list[tuple[str, int, int]]:
    return [(line.item, line.count_min, line.count_max) for line in cost.lines]


def test_every_item_at_both_scales_by_hand() -> None:
    config = _config(
        [{"cpu": "1500m", "replicas": 3, "minReplicas": 1}],
        experiments=("doll", "burst"),
        burst={"instanceType": "r5.xlarge", "hpcWorkers": 2, "cloudNodes": 1},
    )
    cost = hourly_cost(config, TABLE)
    assert _rows(cost) == [
        ("EKS control plane", 1, 1),
        ("NAT gateway", 2, 2),  # the spot cluster's, the on-prem site's
        ("public IPv4 address", 4, 4),  # the NATs' Elastic IPs, the login and cloud nodes
        ("KMS key", 2, 2),  # EKS secrets, the burst Ray token
        # DOLL's 2-CPU head: one 4-vCPU head node (3.5 CPUs for pods)
        ("on-demand m5.xlarge (pool head)", 1, 3),
        # three fixed 1.5-CPU workers: 1.5 + 1.5 on one node (0.5 left), the third on another
        ("spot c5.xlarge|c5a.xlarge (pool spot-cpu)", 2, 10),
        ("EFS shared file system (no hourly charge; billed per GB)", 1, 1),
        ("on-demand r5.xlarge (burst login node)", 1, 1),
        ("on-demand r5.xlarge (burst HPC workers)", 2, 2),
        ("on-demand r5.xlarge (burst cloud nodes)", 1, 1),
    ]
    # a KMS key $7.3 a month = $0.01 an hour; the spot pool at the mean of 0.05 and 0.03
    assert [line.unit_price for line in cost.lines] == pytest.approx(
        [0.1, 0.05, 0.01, 0.01, 0.2, 0.04, 0.0, 0.5, 0.5, 0.5])
    fixed = 0.1 + 2 * 0.05 + 4 * 0.01 + 2 * 0.01
    assert cost.hourly_min == pytest.approx(fixed + 1 * 0.2 + 2 * 0.04 + 4 * 0.5)
    assert cost.hourly_max == pytest.approx(fixed + 3 * 0.2 + 10 * 0.04 + 4 * 0.5)
    assert cost.unpriced == []
    assert (cost.table_date, cost.table_region) == ("2026-01-01", "eu-west-1")


def test_the_ray_autoscaler_keeps_min_replicas_and_its_container_sits_beside_the_head() -> None:
    scaled = hourly_cost(_config([{"cpu": "1500m", "replicas": 3, "minReplicas": 1}],
                                 autoscaler=True), TABLE)
    assert _rows(scaled)[-3:-1] == [
        ("on-demand m5.xlarge (pool head)", 1, 3),  # 2 + 0.5 (autoscaler) CPUs
        ("spot c5.xlarge|c5a.xlarge (pool spot-cpu)", 1, 10),
    ]
    [head, _] = _config([{"cpu": "1", "replicas": 0}], autoscaler=True).ray_clusters["doll"].pods()
    assert (head.cpus, head.memory_gib, head.always_on) == (2.5, 6.5, 1)  # 2/6Gi + 500m/512Mi


def test_nothing_of_a_stack_without_eks_but_burst() -> None:
    cost = hourly_cost(_config([{"cpu": "1", "replicas": 1}], experiments=("burst",)), TABLE)
    assert [item for item, _, _ in _rows(cost)] == [
        "NAT gateway", "public IPv4 address", "KMS key",
        "on-demand r5.4xlarge (burst login node)", "on-demand r5.4xlarge (burst HPC workers)",
        "on-demand r5.4xlarge (burst cloud nodes)",
    ]
    assert cost.unpriced == [item for item, _, _ in _rows(cost)[3:]]  # r5.4xlarge: not here


def test_the_shipped_table_is_dated_and_has_the_fixed_prices() -> None:
    table = load_price_table()
    assert (table["date"], table["region"]) == ("2026-11-01", "us-east-1")
    assert {key: table["hourly"][key] for key in
            ("eks_control_plane", "nat_gateway", "public_ipv4_address")} == {
        "eks_control_plane": 0.10, "nat_gateway": 0.045, "public_ipv4_address": 0.005}


def _spot_nodes_at_minimum(workers: list[dict[str, Any]], autoscaler: bool = False) -> int:
    [line] = [line for line in hourly_cost(_config(workers, autoscaler=autoscaler), TABLE).lines
              if "spot-cpu" in line.item]
    return line.count_min


def test_the_largest_pods_are_placed_first() -> None:
    # 3.5 CPUs a node. Largest first: 2 | 2, then a 1 beside each: two nodes. Smallest first
    # would put 1 + 1 together and need a node for each 2: three.
    assert _spot_nodes_at_minimum([{"cpu": "1000m", "replicas": 2},
                                   {"cpu": "2", "replicas": 2}]) == 2


def test_pods_that_fill_a_node_exactly_share_it_and_one_millicore_more_do_not() -> None:
    # 3.5 CPUs a node; each spot pod holds the notice agent's 100m beside the worker
    assert _spot_nodes_at_minimum([{"cpu": "1650m", "replicas": 2}]) == 1
    assert _spot_nodes_at_minimum([{"cpu": "1651m", "replicas": 2}]) == 2


def test_an_autoscaled_worker_group_without_min_replicas_keeps_no_node() -> None:
    workers = [{"cpu": "1", "replicas": 2, "minReplicas": 0}]
    assert _spot_nodes_at_minimum(workers, autoscaler=True) == 0
    assert _spot_nodes_at_minimum(workers) == 1  # without the autoscaler, `replicas` run


def test_a_pool_never_counts_more_than_its_max_size_at_minimum() -> None:
    # eight fixed 3-CPU workers need eight nodes; the pool may have three
    config = _config([{"cpu": "3", "replicas": 8, "maxReplicas": 8}])
    spot = config.spot_cluster
    assert spot is not None
    pools = {**spot.node_pools, "spotCpu": replace(spot.node_pools["spotCpu"], max_size=3)}
    smaller = replace(config, spot_cluster=replace(spot, node_pools=pools))
    [line] = [line for line in hourly_cost(smaller, TABLE).lines if "spot-cpu" in line.item]
    assert (line.count_min, line.count_max) == (3, 3)
