"""`invoke plan` prints the tree by component and an hourly cost from the dated price table."""

from __future__ import annotations

import json
from statistics import mean

import pytest

from launch.costs import estimate_hourly_cost, load_price_table
from launch.offline import read_stack_config, run_offline
from launch.plan import plan, render_plan


def test_plan_groups_resources_under_their_components() -> None:
    text = render_plan(*plan("dev"))
    for component in (
        "spotburst:network:Network",
        "spotburst:eks:SpotEksCluster",
        "spotburst:kuberay:KubeRay",
        "spotburst:storage:DataBucket",
    ):
        assert f"\n{component}  " in text
    assert "\n  kubernetes:ray.io/v1:RayCluster  doll-raycluster" in text
    assert "dollKubeconfig: [secret]" in text
    assert "price table of 2026-11-01" in text


def test_hourly_cost_adds_control_plane_nat_and_nodes_at_desired_size() -> None:
    table = load_price_table()
    run, cost = plan("dev")
    doll, burst = run.config.doll, run.config.burst
    prices, hourly = table["instances"], table["hourly"]
    burst_nodes = burst.login_nodes + burst.hpc_workers + burst.cloud_nodes
    expected = (
        hourly["eks_control_plane"]
        + 2 * hourly["nat_gateway"]  # the DOLL VPC's and the on-prem site's
        # the two NAT addresses, the login node and every cloud node
        + (2 + 1 + burst.cloud_nodes) * hourly["public_ipv4_address"]
        + doll.head_nodes.desired_size * prices[doll.head_nodes.instance_types[0]]["on_demand"]
        + doll.worker_nodes.desired_size
        * mean(prices[name]["spot"] for name in doll.worker_nodes.instance_types)
        + burst_nodes * prices[burst.instance_type]["on_demand"]
    )
    assert run.config.experiments == ("doll", "burst")
    assert cost.hourly_total == pytest.approx(expected)
    assert f"${cost.hourly_total:8.3f}" in render_plan(run, cost)


def test_more_spot_workers_cost_more_and_unknown_types_are_named() -> None:
    raw = read_stack_config("dev")
    doll = json.loads(raw["spotburst:doll"])
    base = estimate_hourly_cost(run_offline(raw).resources, load_price_table())
    doll["workerNodes"]["desiredSize"] += 4
    doll["workerNodes"]["instanceTypes"] = ["c5.xlarge", "x9z.mega"]
    bigger = estimate_hourly_cost(
        run_offline({**raw, "spotburst:doll": json.dumps(doll)}).resources, load_price_table()
    )
    assert bigger.unpriced == ["spot c5.xlarge|x9z.mega (doll-ray-workers)"]
    doll["workerNodes"]["instanceTypes"] = ["c5.xlarge", "c6i.xlarge"]
    priced = estimate_hourly_cost(
        run_offline({**raw, "spotburst:doll": json.dumps(doll)}).resources, load_price_table()
    )
    assert priced.hourly_total > base.hourly_total
