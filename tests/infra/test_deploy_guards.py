"""What `pulumi up -s dev` refuses before declaring anything, and the stack tag on every AWS
resource: the real entry point (`__main__.py`) and stack program, run under mocks."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pulumi import RunError

from launch.offline import (
    DeclaredResource,
    OfflineRun,
    run_entry_point,
    run_offline,
)
from launch.stack_config import read_stack_config
from stacks.config import (
    ADMIN_CIDR_PLACEHOLDER,
    RequiredConfigMissing,
    parse_config,
    with_admin_cidr_placeholder,
)
from stacks.costs import hourly_cost
from stacks.fields import ConfigError
from vocab.prices import kms_key_hourly, load_price_table, node_price
from vocab.tags import STACK_TAG_KEY

FIX_LINE = (
    "Missing required configuration variable 'spotburst:adminCidrs': the EKS experiments "
    "(doll, elastic, rl, inference) need the cluster's API reachable from where you deploy; "
    "please set a value using the command `pulumi config set --path 'spotburst:adminCidrs[0]' "
    "<your-ip>/32` (or, deploying from inside the VPC, `pulumi config set "
    "spotburst:apiEndpoint private`)"
)


def _eks_api_cidrs(resources: list[DeclaredResource]) -> list[str]:
    [cluster] = [r for r in resources if r.type == "eks:index:Cluster"]
    return list(cluster.inputs.get("publicAccessCidrs") or [])


# --- the EKS API must be reachable from the deployer ----------------------------------------


def test_shipped_config_stops_pulumi_up_before_the_first_resource() -> None:
    declared, error = run_entry_point(read_stack_config("dev"), "dev")
    assert isinstance(error, RunError)  # Pulumi prints it as one line, no traceback
    assert str(error) == FIX_LINE
    assert declared == []


def test_shipped_config_with_an_admin_cidr_deploys_with_the_api_open_to_it_only() -> None:
    raw = {**read_stack_config("dev"), "spotburst:adminCidrs": '["198.51.100.7/32"]'}
    declared, error = run_entry_point(raw, "dev")
    assert error is None
    assert any(r.type == "eks:index:Cluster" for r in declared)


def test_api_endpoint_private_is_the_explicit_opt_in_and_keeps_the_endpoint_private() -> None:
    raw = {**read_stack_config("dev"), "spotburst:apiEndpoint": "private"}
    config = parse_config(raw, "dev")
    assert config.api_endpoint == "private" and config.admin_cidrs == ()
    run = run_offline({**raw, "spotburst:adminCidrs": '["198.51.100.7/32"]'}, "dev")
    [cluster] = run.of_type("eks:index:Cluster")
    assert cluster.inputs.get("endpointPublicAccess") in (False, None)
    assert not cluster.inputs.get("publicAccessCidrs")


def test_a_stack_without_eks_needs_no_admin_cidrs() -> None:
    raw = {**read_stack_config("dev"), "spotburst:experiments": '["burst"]'}
    assert parse_config(raw, "dev").admin_cidrs == ()
    assert with_admin_cidr_placeholder(raw) == (raw, None)


def test_api_endpoint_takes_public_or_private_only() -> None:
    raw = {**read_stack_config("dev"), "spotburst:apiEndpoint": "vpn"}
    with pytest.raises(ConfigError) as refused:
        parse_config(raw, "dev")
    assert str(refused.value) == (
        "spotburst:apiEndpoint: 'vpn' is not allowed; expected public or private")


def test_plan_config_uses_the_documentation_range_and_says_so() -> None:
    raw, note = with_admin_cidr_placeholder(read_stack_config("dev"))
    assert json.loads(raw["spotburst:adminCidrs"]) == [ADMIN_CIDR_PLACEHOLDER]
    assert note is not None and ADMIN_CIDR_PLACEHOLDER in note and "refuses" in note
    assert _eks_api_cidrs(run_offline(raw, "dev").resources) == [ADMIN_CIDR_PLACEHOLDER]
    with pytest.raises(RequiredConfigMissing):
        parse_config(read_stack_config("dev"), "dev")


# --- spotburst:maxHourlyUsd -------------------------------------------------------------------


BILLED_BY_THE_HOUR_UNCOUNTED = (
    "aws:ec2/vpcEndpoint:VpcEndpoint",
    "aws:lb/loadBalancer:LoadBalancer",
    "aws:elasticache/cluster:Cluster",
    "aws:rds/instance:Instance",
    "aws:ec2transitgateway/transitGateway:TransitGateway",
)
"""Billed by the hour, and not counted by stacks/costs.py: the stack must declare none."""


def _declared_max_hourly(resources: list[DeclaredResource], table: dict[str, Any]) -> float:
    """$/h of what the program declared, every node group at maxSize: this test's own count,
    from the resources, not from the config."""
    fixed = table["hourly"]
    total = 0.0
    for resource in resources:
        inputs = resource.inputs
        if resource.type == "eks:index:Cluster":
            total += fixed["eks_control_plane"]
        elif resource.type == "aws:ec2/natGateway:NatGateway":
            total += fixed["nat_gateway"]
        elif resource.type == "aws:ec2/eip:Eip":
            total += fixed["public_ipv4_address"]
        elif resource.type == "aws:kms/key:Key":
            total += kms_key_hourly(table)
        elif resource.type == "eks:index:ManagedNodeGroup":
            spot = inputs.get("capacityType") == "SPOT"
            price = node_price(table["instances"], inputs["instanceTypes"], spot)
            assert price is not None, resource.name
            total += inputs["scalingConfig"]["maxSize"] * price
        elif resource.type == "aws:ec2/instance:Instance":
            spot = bool(inputs.get("instanceMarketOptions"))
            price = node_price(table["instances"], [inputs["instanceType"]], spot)
            assert price is not None, resource.name
            total += price
            if inputs.get("associatePublicIpAddress"):
                total += fixed["public_ipv4_address"]
        elif resource.type == "aws:elasticache/replicationGroup:ReplicationGroup":
            total += inputs["numCacheClusters"] * table["elasticache"][inputs["nodeType"]]
        assert resource.type not in BILLED_BY_THE_HOUR_UNCOUNTED, resource.type
    return total


def test_the_cost_counts_what_the_program_declares(
    dev_config: dict[str, str], dev_run: OfflineRun
) -> None:
    """stacks/costs.py counts from config, before anything is declared (the program's
    maxHourlyUsd refusal, the plan, the budget prompt): it must match what is declared."""
    table = load_price_table()
    burst = json.loads(dev_config["spotburst:burst"])
    spot = json.loads(dev_config["spotburst:spotCluster"])
    spot["nodePools"]["spotCpu"]["maxSize"] = 40
    runs = {
        "dev": dev_run,
        "burst only": run_offline({**dev_config, "spotburst:experiments": '["burst"]'}, "dev"),
        "eks only, bigger": run_offline(
            {
                **dev_config,
                "spotburst:experiments": '["doll", "rl"]',
                "spotburst:spotCluster": json.dumps(spot),
            },
            "dev",
        ),
        "more burst nodes": run_offline(
            {
                **dev_config,
                "spotburst:experiments": '["burst"]',
                "spotburst:burst": json.dumps({**burst, "hpcWorkers": 3, "cloudNodes": 4}),
            },
            "dev",
        ),
    }
    for name, run in runs.items():
        declared = _declared_max_hourly(run.resources, table)
        assert hourly_cost(run.config, table).hourly_max == pytest.approx(declared), name
    assert _declared_max_hourly(runs["more burst nodes"].resources, table) == pytest.approx(
        0.045 + 6 * 0.005 + 1.0 / 730 + 8 * 1.008  # NAT, its IP + login + 4 cloud nodes
    )


def test_max_hourly_usd_refuses_a_stack_that_may_cost_more(
    dev_config: dict[str, str], dev_run: OfflineRun
) -> None:
    maximum = hourly_cost(dev_run.config, load_price_table()).hourly_max
    assert maximum == pytest.approx(7.3227, abs=1e-3)  # with the GCS Redis's 2 nodes
    declared, error = run_entry_point({**dev_config, "spotburst:maxHourlyUsd": "5"}, "dev")
    assert declared == []
    assert isinstance(error, RunError)
    assert str(error) == (
        "spotburst:maxHourlyUsd: the stack costs up to $7.32 per hour at maximum scale (every "
        "node pool at maxSize), above the $5.00 allowed; lower the pools' maxSize or raise the "
        "limit: pulumi config set spotburst:maxHourlyUsd 7.33")
    assert parse_config({**dev_config, "spotburst:maxHourlyUsd": "7.33"}, "dev")
    with pytest.raises(ConfigError, match=r"up to \$7\.32 per hour"):  # the Redis counts
        parse_config({**dev_config, "spotburst:maxHourlyUsd": "7.27"}, "dev")
    with pytest.raises(ConfigError, match="spotburst:maxHourlyUsd: 'lots' is not allowed"):
        parse_config({**dev_config, "spotburst:maxHourlyUsd": "lots"}, "dev")


def test_max_hourly_usd_refuses_what_it_cannot_price(dev_config: dict[str, str]) -> None:
    burst = {**json.loads(dev_config["spotburst:burst"]), "instanceType": "x9z.mega"}
    raw = {**dev_config, "spotburst:burst": json.dumps(burst), "spotburst:maxHourlyUsd": "100"}
    with pytest.raises(ConfigError) as refused:
        parse_config(raw, "dev")
    assert str(refused.value) == (
        "spotburst:maxHourlyUsd: cannot price x9z.mega; add it to vocab/prices.json or remove "
        "maxHourlyUsd")


# --- the stack tag on every AWS resource ------------------------------------------------------


def test_every_aws_resource_carries_the_stack_tag(dev_config: dict[str, str]) -> None:
    """Every AWS resource, and every pulumi-eks component (which creates its own), goes through
    the one provider whose default tags carry `spotburst:stack=<stack>`."""
    declared, error = run_entry_point(dev_config, "dev")
    assert error is None
    providers = {
        f"{r.urn}::{r.resource_id}": r for r in declared if r.type == "pulumi:providers:aws"
    }
    assert len(providers) == 1
    [(reference, provider)] = providers.items()
    default_tags = provider.inputs["defaultTags"]  # provider inputs arrive JSON-encoded
    assert json.loads(default_tags)["tags"] == {STACK_TAG_KEY: "dev"}
    on_aws = [r for r in declared if r.custom and r.type.startswith("aws:")]
    on_eks = [r for r in declared if r.type.startswith("eks:")]
    assert len(on_aws) > 50 and len(on_eks) == 5
    untagged = [f"{r.type} {r.name}" for r in on_aws if r.provider != reference]
    untagged += [f"{r.type} {r.name}" for r in on_eks if dict(r.providers).get("aws") != reference]
    assert untagged == []
