"""`invoke plan` prints the tree, the shared spot cluster and the hourly cost at minimum and
maximum scale from the dated price table."""

from __future__ import annotations

import json
import re

import pytest

from launch.costs import estimate_hourly_cost, load_price_table
from launch.offline import run_offline
from launch.plan import plan, render_plan
from launch.stack_config import read_stack_config
from stacks.config import with_admin_cidr_placeholder


def test_plan_shows_the_shared_cluster_its_rayclusters_and_pools() -> None:
    text = render_plan(*plan("dev"))
    for component in (
        "spotburst:network:Network",
        "spotburst:eks:EksCluster",
        "spotburst:kuberay:KubeRayOperator",
        "spotburst:kuberay:RayCluster",
        "spotburst:eks:ClusterAutoscaler",
        "spotburst:storage:DataBucket",
    ):
        assert f"\n{component}  " in text
    assert "\n  kubernetes:ray.io/v1:RayCluster  rl-raycluster" in text
    assert "Shared spot cluster spotburst-dev-spot (EKS 1.34" in text
    for experiment in ("doll", "elastic", "rl", "inference"):
        assert f"RayCluster {experiment!r} in namespace {experiment!r}" in text
    assert "    spot-gpu     spot      g4dn.2xlarge" in text
    assert "worker group learner                pool learner-gpu  0-1 pods" in text
    assert "dollKubeconfig: [secret]" in text
    assert "price table of 2026-11-01" in text


def test_costs_at_minimum_and_maximum_scale_by_hand() -> None:
    run, cost, _ = plan("dev")
    # Prices from vocab/prices.json, counted by hand for the shipped dev config.
    fixed = 0.10 + 2 * 0.045 + 4 * 0.005 + 2 * 1.00 / 730  # EKS, 2 NATs, 4 IPv4, 2 KMS keys
    burst = 3 * 1.008  # login, HPC worker, cloud node: r5.4xlarge on-demand
    head = 0.384  # m5.2xlarge on-demand
    spot_cpu = (0.068 + 0.062 + 0.066) / 3  # mean spot of c5/c5a/c6i.xlarge
    # Always on: 4 heads (2+1+1+1 CPU) fit one 8-vCPU head node; DOLL's 4 and inference's 3
    # fixed replicas of 3 CPU take one 4-vCPU spot node each; elastic and rl (Ray
    # autoscaler, minReplicas 0) and the GPU pools add nothing until used.
    redis = 2 * 0.032  # inference's GCS Redis: a primary and a replica, cache.t4g.small
    minimum = fixed + burst + 1 * head + 7 * spot_cpu + redis
    maximum = fixed + burst + 2 * head + 24 * spot_cpu + 1 * 0.526 + 4 * 0.29 + redis
    assert cost.hourly_min == pytest.approx(minimum)
    assert cost.hourly_max == pytest.approx(maximum)
    text = render_plan(run, cost)
    assert f"or what always-on Ray pods need): ${minimum:.3f} per hour" in text
    assert f"at maximum scale (every pool at maxSize): ${maximum:.3f} per hour" in text
    assert cost.unpriced == []


def test_bigger_pools_cost_more_at_max_only_and_unknown_types_are_named() -> None:
    raw = with_admin_cidr_placeholder(read_stack_config("dev"))[0]
    spot = json.loads(raw["spotburst:spotCluster"])
    base = estimate_hourly_cost(run_offline(raw).resources, load_price_table())
    spot["nodePools"]["spotGpu"]["maxSize"] = 8
    bigger = estimate_hourly_cost(
        run_offline({**raw, "spotburst:spotCluster": json.dumps(spot)}).resources,
        load_price_table(),
    )
    assert bigger.hourly_min == pytest.approx(base.hourly_min)
    assert bigger.hourly_max == pytest.approx(base.hourly_max + 4 * 0.29)
    spot["nodePools"]["spotCpu"]["instanceTypes"] = ["c5.xlarge", "x9z.mega"]
    unknown = estimate_hourly_cost(
        run_offline({**raw, "spotburst:spotCluster": json.dumps(spot)}).resources,
        load_price_table(),
    )
    assert unknown.unpriced == ["spot c5.xlarge|x9z.mega (eks-spot-cpu)"]


def test_minimum_counts_fixed_replicas_but_not_autoscaled_ones() -> None:
    raw = with_admin_cidr_placeholder(read_stack_config("dev"))[0]
    base = estimate_hourly_cost(run_offline(raw).resources, load_price_table())
    spot_cpu = (0.068 + 0.062 + 0.066) / 3
    inference = json.loads(raw["spotburst:inference"])
    inference["workerGroups"][0].update(minReplicas=0, replicas=0)
    fewer = estimate_hourly_cost(
        run_offline({**raw, "spotburst:inference": json.dumps(inference)}).resources,
        load_price_table(),
    )
    assert fewer.hourly_min == pytest.approx(base.hourly_min - 3 * spot_cpu)
    elastic = json.loads(raw["spotburst:elastic"])
    elastic["workerGroups"][0].update(replicas=5)  # ignored: the Ray autoscaler sizes it
    same = estimate_hourly_cost(
        run_offline({**raw, "spotburst:elastic": json.dumps(elastic)}).resources,
        load_price_table(),
    )
    assert same.hourly_min == pytest.approx(base.hourly_min)
    assert fewer.hourly_max == pytest.approx(base.hourly_max) == same.hourly_max


def test_the_gcs_redis_is_priced_per_node_in_the_plan_and_the_ceiling() -> None:
    from stacks.cost_ceiling import max_scale_hourly_usd

    raw = with_admin_cidr_placeholder(read_stack_config("dev"))[0]
    table = load_price_table()
    with_redis = run_offline(raw)
    cost = estimate_hourly_cost(with_redis.resources, table)
    [line] = [line for line in cost.lines if line.item.startswith("ElastiCache")]
    assert line.item == "ElastiCache cache.t4g.small (inference-gcs-redis)"
    assert (line.count_min, line.count_max, line.unit_price) == (2, 2, 0.032)
    shown = (r"\n  ElastiCache cache\.t4g\.small \(inference-gcs-redis\) +0\.0320 +2 +0\.064"
             r" +2 +0\.064\n")
    assert re.search(shown, render_plan(with_redis, cost))
    # without the inference cluster there is no Redis, in the plan or in maxHourlyUsd
    experiments = '["doll", "elastic", "rl", "burst"]'
    without = run_offline({**raw, "spotburst:experiments": experiments})
    assert not any(r.type.startswith("aws:elasticache") for r in without.resources)
    ceiling = max_scale_hourly_usd(with_redis.config, table)
    ceiling_without = max_scale_hourly_usd(without.config, table)
    assert ceiling == pytest.approx(cost.hourly_max)
    inference_pool_nodes = ceiling - ceiling_without - 2 * 0.032
    assert inference_pool_nodes >= 0  # the Redis is counted on top of what the pools cost
    unpriced = {**table, "elasticache": {}}
    assert estimate_hourly_cost(with_redis.resources, unpriced).unpriced == [line.item]
