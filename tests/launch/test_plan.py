"""`invoke plan` prints the tree, the shared spot cluster and the hourly cost at minimum and
maximum scale from the dated price table."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from launch.offline import OfflineRun, run_offline
from launch.plan import plan, render_plan
from launch.stack_config import read_stack_config
from stacks.config import parse_config, with_admin_cidr_placeholder
from stacks.costs import CostEstimate, hourly_cost
from vocab.prices import load_price_table

# Each offline run of the whole stack program takes seconds: the shipped dev config is run
# once for the module, and each test runs only the variants it compares against it.
Planned = tuple[OfflineRun, CostEstimate, str | None]


async def _nothing() -> None:
    return None


@pytest.fixture(scope="module")
def planned() -> Planned:
    # as after a Ray Job client or a workload in the same process: asyncio.run leaves the
    # thread without a current event loop, which the offline run must not need
    asyncio.run(_nothing())
    return plan("dev")


@pytest.fixture(scope="module")
def raw() -> dict[str, str]:
    return with_admin_cidr_placeholder(read_stack_config("dev"))[0]


def test_plan_shows_the_shared_cluster_its_rayclusters_and_pools(planned: Planned) -> None:
    text = render_plan(*planned)
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


def test_costs_at_minimum_and_maximum_scale_by_hand(planned: Planned) -> None:
    run, cost, _ = planned
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


def test_bigger_pools_cost_more_at_max_only_and_unknown_types_are_named(
    raw: dict[str, str], planned: Planned
) -> None:
    spot = json.loads(raw["spotburst:spotCluster"])
    base = planned[1]
    spot["nodePools"]["spotGpu"]["maxSize"] = 8
    bigger = hourly_cost(
        parse_config({**raw, "spotburst:spotCluster": json.dumps(spot)}, "dev"),
        load_price_table(),
    )
    assert bigger.hourly_min == pytest.approx(base.hourly_min)
    assert bigger.hourly_max == pytest.approx(base.hourly_max + 4 * 0.29)
    # c6a.2xlarge: its shape is known (vocab/instances.json), its price is not
    spot["nodePools"]["spotCpu"]["instanceTypes"] = ["c5.xlarge", "c6a.2xlarge"]
    unknown = hourly_cost(
        parse_config({**raw, "spotburst:spotCluster": json.dumps(spot)}, "dev"),
        load_price_table(),
    )
    assert unknown.unpriced == ["spot c5.xlarge|c6a.2xlarge (pool spot-cpu)"]


def test_minimum_counts_fixed_replicas_but_not_autoscaled_ones(
    raw: dict[str, str], planned: Planned
) -> None:
    base = planned[1]
    spot_cpu = (0.068 + 0.062 + 0.066) / 3
    # One run with both changes: inference's 3 fixed replicas of 3 CPU gone (one 4-vCPU spot
    # node each less at minimum), and elastic's `replicas` raised to 5, which must change
    # nothing (the Ray autoscaler sizes it): counting them would add 5 nodes to the minimum.
    inference = json.loads(raw["spotburst:inference"])
    inference["workerGroups"][0].update(minReplicas=0, replicas=0)
    elastic = json.loads(raw["spotburst:elastic"])
    elastic["workerGroups"][0].update(replicas=5)
    changed = {
        **raw,
        "spotburst:inference": json.dumps(inference),
        "spotburst:elastic": json.dumps(elastic),
    }
    fewer = hourly_cost(parse_config(changed, "dev"), load_price_table())
    assert fewer.hourly_min == pytest.approx(base.hourly_min - 3 * spot_cpu)
    assert fewer.hourly_max == pytest.approx(base.hourly_max)


def test_the_gcs_redis_is_priced_per_node_in_the_plan_and_the_ceiling(
    raw: dict[str, str], planned: Planned
) -> None:
    table = load_price_table()
    with_redis, cost, _ = planned
    [line] = [line for line in cost.lines if line.item.startswith("ElastiCache")]
    assert line.item == "ElastiCache cache.t4g.small (inference GCS Redis)"
    assert (line.count_min, line.count_max, line.unit_price) == (2, 2, 0.032)
    shown = (r"\n  ElastiCache cache\.t4g\.small \(inference GCS Redis\) +0\.0320 +2 +0\.064"
             r" +2 +0\.064\n")
    assert re.search(shown, render_plan(with_redis, cost))
    # without the inference cluster there is no Redis, in the plan or in maxHourlyUsd
    experiments = '["doll", "elastic", "rl", "burst"]'
    without = run_offline({**raw, "spotburst:experiments": experiments})
    assert not any(r.type.startswith("aws:elasticache") for r in without.resources)
    ceiling = hourly_cost(with_redis.config, table).hourly_max
    ceiling_without = hourly_cost(without.config, table).hourly_max
    assert ceiling == pytest.approx(cost.hourly_max)
    inference_pool_nodes = ceiling - ceiling_without - 2 * 0.032
    assert inference_pool_nodes >= 0  # the Redis is counted on top of what the pools cost
    unpriced = {**table, "elasticache": {}}
    assert hourly_cost(with_redis.config, unpriced).unpriced == [line.item]
