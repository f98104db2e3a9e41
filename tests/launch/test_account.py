"""The AWS account side of a deployment (launch/account): quota arithmetic, each preflight check
passing and failing with its one line, the budget prompt, and the leftover listing.

boto3 talks to a real moto_server on loopback; Service Quotas values moto does not serve (it
only knows the VPC defaults) are stubbed at the boto3 boundary with botocore's Stubber.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber
from invoke import Context, Exit

import launch.account.stack
import tasks
from launch.account.aws import AwsAccount
from launch.account.budget import confirm_budget
from launch.account.checks import (
    Status,
    check_burst_tools,
    check_credentials,
    check_kubectl,
    check_pulumi_backend,
    check_quotas,
    check_region,
    failures,
    render_preflight,
    run_preflight,
)
from launch.account.leftovers import Leftover, find_leftovers, render_leftovers
from launch.account.scale import (
    ELASTIC_IPS,
    NAT_GATEWAYS,
    ON_DEMAND_GVT,
    ON_DEMAND_STANDARD,
    SPOT_GVT,
    SPOT_STANDARD,
    VPCS,
    Capacity,
    NodePoolScale,
    Quota,
    StackScale,
    cluster_names_from_plan,
    load_vcpu_table,
    required_quotas,
    scale_from_plan,
    vcpu_family,
)
from launch.account.stack import preflight_stack
from launch.account.usage import usage_by_others
from launch.offline import DeclaredResource, run_offline
from launch.stack_config import read_stack_config
from netem.ports import free_local_port
from stacks.config import with_admin_cidr_placeholder
from tests.helpers.processes import FAKE_CREDENTIALS, moto_server
from vocab.tags import STACK_TAG_KEY, stack_tags

PROJECT_DIR = Path(__file__).resolve().parents[2]
CLUSTER = "spotburst-dev-spot"
# Issue 10's GPU pools: on-demand learners g4dn.xlarge 0-1, spot g4dn.2xlarge 0-N.
GPU_POOLS = (
    NodePoolScale("gpu-learner", ("g4dn.xlarge",), Capacity.ON_DEMAND, 1),
    NodePoolScale("gpu-spot", ("g4dn.2xlarge",), Capacity.SPOT, 4),
)


def _needs(scale: StackScale) -> dict[Quota, int]:
    return {need.quota: need.amount for need in required_quotas(scale, load_vcpu_table())}


@pytest.fixture(scope="module")
def dev_plan_resources() -> list[DeclaredResource]:
    return run_offline(with_admin_cidr_placeholder(read_stack_config("dev"))[0], "dev").resources


# --- quota arithmetic (pure) ------------------------------------------------------------------


def test_dev_plan_needs_its_pools_at_maximum_size(
    dev_plan_resources: list[DeclaredResource],
) -> None:
    scale = scale_from_plan(dev_plan_resources)
    pools = {pool.name: pool for pool in scale.pools}
    assert pools["eks-spot-cpu"] == NodePoolScale(
        "eks-spot-cpu", ("c5.xlarge", "c5a.xlarge", "c6i.xlarge"), Capacity.SPOT, 24
    )
    assert pools["eks-head"].capacity is Capacity.ON_DEMAND
    assert (scale.vpcs, scale.elastic_ips, scale.nat_gateways_per_az) == (3, 2, 2)
    assert scale.unsized == ()
    # head 2 x m5.2xlarge (8) + three r5.4xlarge burst nodes (16 each); 24 spot CPU nodes x 4;
    # GPU pools: 1 on-demand g4dn.xlarge (4), 4 spot g4dn.2xlarge (8).
    assert _needs(scale) == {
        ON_DEMAND_STANDARD: 2 * 8 + 3 * 16,
        SPOT_STANDARD: 24 * 4,
        ON_DEMAND_GVT: 1 * 4,
        SPOT_GVT: 4 * 8,
        VPCS: 3,
        ELASTIC_IPS: 2,
        NAT_GATEWAYS: 2,
    }
    assert cluster_names_from_plan(dev_plan_resources) == [CLUSTER]


def test_gpu_quotas_only_when_a_gpu_pool_can_grow_above_zero() -> None:
    base = StackScale(pools=(), vpcs=1, elastic_ips=0, nat_gateways_per_az=0)
    idle = StackScale(
        pools=tuple(NodePoolScale(p.name, p.instance_types, p.capacity, 0) for p in GPU_POOLS),
        vpcs=1, elastic_ips=0, nat_gateways_per_az=0,
    )
    grown = StackScale(pools=GPU_POOLS, vpcs=1, elastic_ips=0, nat_gateways_per_az=0)
    assert _needs(base) == _needs(idle) == {VPCS: 1}
    assert _needs(grown) == {ON_DEMAND_GVT: 4, SPOT_GVT: 4 * 8, VPCS: 1}


def test_a_diversified_pool_counts_at_its_largest_type() -> None:
    pool = NodePoolScale("mixed", ("c5.xlarge", "c5.2xlarge"), Capacity.SPOT, 5)
    scale = StackScale(pools=(pool,), vpcs=0, elastic_ips=0, nat_gateways_per_az=0)
    assert _needs(scale) == {SPOT_STANDARD: 5 * 8}


def test_types_without_a_count_or_outside_the_checked_families_are_refused() -> None:
    def scale_of(*types: str) -> StackScale:
        pool = NodePoolScale("pool", types, Capacity.SPOT, 2)
        return StackScale(pools=(pool,), vpcs=0, elastic_ips=0, nat_gateways_per_az=0)

    with pytest.raises(ValueError, match="no vCPU count for instance type zz9.huge"):
        required_quotas(scale_of("c5.xlarge", "zz9.huge"), load_vcpu_table())
    with pytest.raises(ValueError, match="not all in one of the families"):
        required_quotas(scale_of("c5.xlarge", "g4dn.xlarge"), {"c5.xlarge": 4, "g4dn.xlarge": 4})
    with pytest.raises(ValueError, match="p3.2xlarge"):
        required_quotas(scale_of("p3.2xlarge"), {"p3.2xlarge": 8})
    families = {name: vcpu_family(name) for name in (
        "m5.xlarge", "z1d.large", "im4gn.large", "hpc6a.48xlarge", "inf2.xlarge", "trn1.2xlarge",
        "dl1.24xlarge", "g4dn.xlarge", "vt1.3xlarge", "x2idn.16xlarge", "p4d.24xlarge",
    )}
    assert families == {
        "m5.xlarge": "standard", "z1d.large": "standard", "im4gn.large": "standard",
        "hpc6a.48xlarge": "other", "inf2.xlarge": "other", "trn1.2xlarge": "other",
        "dl1.24xlarge": "other", "g4dn.xlarge": "gvt", "vt1.3xlarge": "gvt",
        "x2idn.16xlarge": "other", "p4d.24xlarge": "other",
    }


def _resource(kind: str, name: str, **inputs: Any) -> DeclaredResource:
    return DeclaredResource(f"urn:{name}", f"{name}-id", kind, name, "", True, inputs, ())


def test_nat_gateways_count_per_zone_and_an_unknown_zone_counts_against_the_fullest() -> None:
    subnet = "aws:ec2/subnet:Subnet"
    nat = "aws:ec2/natGateway:NatGateway"
    resources = [
        _resource(subnet, "a1", availabilityZone="us-east-1a"),
        _resource(subnet, "a2", availabilityZone="us-east-1a"),
        _resource(subnet, "b1", availabilityZone="us-east-1b"),
        _resource(nat, "n1", subnetId="a1-id"),
        _resource(nat, "n2", subnetId="a2-id"),
        _resource(nat, "n3", subnetId="b1-id"),
    ]
    assert scale_from_plan(resources).nat_gateways_per_az == 2
    unknown = _resource(nat, "n4", subnetId="somewhere")
    assert scale_from_plan([*resources, unknown]).nat_gateways_per_az == 3


def test_a_resource_that_launches_instances_but_cannot_be_sized_is_named() -> None:
    resources = [_resource("aws:autoscaling/group:Group", "workers", maxSize=9)]
    scale = scale_from_plan(resources)
    assert scale.unsized == ("aws:autoscaling/group:Group workers",)
    account = AwsAccount("us-east-1", "http://127.0.0.1:9")  # never called: nothing to read
    [result] = check_quotas(account, scale, "dev")
    assert result.failed
    assert result.name == "quota for aws:autoscaling/group:Group workers"
    assert "scale_from_plan" in result.detail


# --- moto_server -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture
def isolated_aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No credentials or config from this machine's ~/.aws, no instance metadata."""
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                 "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def account(moto_endpoint: str, isolated_aws: None, monkeypatch: pytest.MonkeyPatch) -> AwsAccount:
    """A fresh moto account (the server is reset) in us-east-1."""
    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    reset = urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST")
    urllib.request.urlopen(reset, timeout=10).close()
    return AwsAccount("us-east-1", moto_endpoint)


def _one_line(detail: str) -> None:
    assert detail and "\n" not in detail


# --- credentials and region -------------------------------------------------------------------


@pytest.mark.moto
def test_credentials_resolve_to_the_moto_account(account: AwsAccount) -> None:
    result = check_credentials(account)
    assert result.status is Status.PASS
    assert "account 123456789012" in result.detail


def test_no_credentials_fail_with_how_to_configure(isolated_aws: None) -> None:
    result = check_credentials(AwsAccount("us-east-1", "http://127.0.0.1:9"))
    assert result.failed
    _one_line(result.detail)
    assert result.detail.startswith("no AWS credentials found: run `aws configure`")


def test_a_missing_profile_fails_naming_it(
    isolated_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_PROFILE", "research")
    result = check_credentials(AwsAccount("us-east-1"))
    assert result.failed
    _one_line(result.detail)
    assert "research" in result.detail and "aws configure --profile" in result.detail


@pytest.mark.moto
def test_rejected_credentials_fail(isolated_aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # moto checks access keys once INITIAL_NO_AUTH_ACTION_COUNT runs out: these are unknown.
    monkeypatch.setenv("INITIAL_NO_AUTH_ACTION_COUNT", "0")
    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    with moto_server() as endpoint:
        result = check_credentials(AwsAccount("us-east-1", endpoint))
    assert result.failed
    _one_line(result.detail)
    assert result.detail.startswith("AWS rejected the credentials (InvalidClientTokenId)")


def test_expired_credentials_fail_with_how_to_refresh(account_stub: AwsAccount) -> None:
    with Stubber(account_stub.client("sts")) as sts:
        sts.add_client_error("get_caller_identity", "ExpiredToken", "The token has expired")
        result = check_credentials(account_stub)
    assert result.failed
    _one_line(result.detail)
    assert "expired (ExpiredToken)" in result.detail and "aws sso login" in result.detail


def test_an_unreachable_sts_fails(isolated_aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    closed = f"http://127.0.0.1:{free_local_port()}"
    result = check_credentials(AwsAccount("us-east-1", closed))
    assert result.failed
    _one_line(result.detail)
    assert result.detail.startswith("cannot reach AWS STS")


@pytest.fixture
def account_stub(isolated_aws: None, monkeypatch: pytest.MonkeyPatch) -> AwsAccount:
    """An account whose clients never reach a server: every call must be stubbed."""
    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    return AwsAccount("us-east-1", "http://127.0.0.1:9")


@pytest.mark.moto
def test_region_checks(account: AwsAccount) -> None:
    assert check_region("eu-west-1", "dev", account).status is Status.PASS
    unset = check_region(None, "dev", account)
    assert unset.failed
    _one_line(unset.detail)
    assert "pulumi config set aws:region us-east-1 --stack dev" in unset.detail
    # moto's account has ap-east-1 (an opt-in region) not enabled, like a new real account.
    disabled = check_region("ap-east-1", "dev", account)
    assert disabled.failed
    _one_line(disabled.detail)
    assert "not enabled for this account" in disabled.detail
    assert "aws account enable-region --region-name ap-east-1" in disabled.detail
    unknown = check_region("xx-middle-9", "dev", account)
    assert unknown.failed and "is not an AWS region" in unknown.detail


# --- tools --------------------------------------------------------------------------------------


def _executable(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


def test_pulumi_cli_missing_fails_with_install_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    result = check_pulumi_backend()
    assert result.failed
    _one_line(result.detail)
    assert "Pulumi CLI is not installed" in result.detail and "get.pulumi.com" in result.detail


@pytest.mark.subprocess
def test_pulumi_without_a_backend_fails_with_login_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _executable(tmp_path, "pulumi", "echo 'error: PULUMI_ACCESS_TOKEN must be set for login "
                "during non-interactive CLI sessions' >&2; exit 255")
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    result = check_pulumi_backend()
    assert result.failed
    _one_line(result.detail)
    assert "PULUMI_ACCESS_TOKEN must be set" in result.detail and "pulumi login" in result.detail


@pytest.mark.subprocess
def test_pulumi_logged_in_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _executable(tmp_path, "pulumi", '[ "$1" = whoami ] && echo alice')
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    result = check_pulumi_backend()
    assert result.status is Status.PASS and result.detail == "logged in as alice"


def test_kubectl_needed_only_with_eks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    missing = check_kubectl(eks_enabled=True)
    assert missing.failed
    _one_line(missing.detail)
    assert missing.detail.startswith("kubectl is not on PATH: install kubectl")
    assert check_kubectl(eks_enabled=False).status is Status.SKIP
    _executable(tmp_path, "kubectl", "exit 0")
    assert check_kubectl(eks_enabled=True).status is Status.PASS


def test_the_aws_cli_and_its_plugin_are_needed_only_with_burst(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    cli, plugin = check_burst_tools(burst_enabled=True)
    assert cli.failed and plugin.failed
    _one_line(cli.detail)
    _one_line(plugin.detail)
    assert cli.detail.startswith("aws is not on PATH: install the AWS CLI")
    assert plugin.detail.startswith("session-manager-plugin is not on PATH: install")
    assert all(r.status is Status.SKIP for r in check_burst_tools(burst_enabled=False))
    _executable(tmp_path, "aws", "exit 0")
    _executable(tmp_path, "session-manager-plugin", "exit 0")
    assert all(r.status is Status.PASS for r in check_burst_tools(burst_enabled=True))


# --- Service Quotas -----------------------------------------------------------------------------


@pytest.mark.moto
def test_vpc_quotas_as_moto_serves_them(account: AwsAccount) -> None:
    """moto serves the VPC defaults (5 VPCs per region, 5 NAT gateways per zone) unstubbed;
    its account has a default VPC, which uses one of the five."""
    scale = StackScale(pools=(), vpcs=5, elastic_ips=0, nat_gateways_per_az=2)
    vpcs, nats = check_quotas(account, scale, "dev")
    assert vpcs.failed
    _one_line(vpcs.detail)
    assert vpcs.name == "VPCs per region (L-F678F1CE)"
    assert vpcs.detail.startswith(
        "quota 5 (applied), stack 'dev' needs 5 at maximum scale (VPCs the stack declares) "
        "+ 1 in use by other resources; ask for 6: aws service-quotas")
    assert "--service-code vpc --quota-code L-F678F1CE --desired-value 6" in vpcs.detail
    assert nats.status is Status.PASS and "covers the 2 needed" in nats.detail


@pytest.mark.moto
def test_quota_usage_counts_other_resources_not_the_stacks_own(account: AwsAccount) -> None:
    ec2 = account.client("ec2")
    _, subnets = _subnets(account)

    def run(instance_type: str, tags: dict[str, str], **market: Any) -> None:
        ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1,
                          InstanceType=instance_type, SubnetId=subnets[0], **market,
                          TagSpecifications=[{"ResourceType": "instance", "Tags": _tags(tags)}])

    run("m5.xlarge", {"team": "other"})
    run("c5.2xlarge", {"team": "other"}, InstanceMarketOptions={"MarketType": "spot"})
    run("g4dn.xlarge", {"team": "other"})
    run("m5.4xlarge", {"eks:cluster-name": CLUSTER})  # the stack's own node: part of the need
    run("r5.4xlarge", stack_tags("dev"))
    ec2.allocate_address(Domain="vpc")
    other_address = ec2.allocate_address(Domain="vpc")["AllocationId"]
    ec2.create_nat_gateway(SubnetId=subnets[0], AllocationId=other_address)
    ec2.allocate_address(Domain="vpc", TagSpecifications=[
        {"ResourceType": "elastic-ip", "Tags": _tags(stack_tags("dev"))}])
    in_use = usage_by_others(account, "dev", [CLUSTER], load_vcpu_table())
    # moto's default VPC and the one _subnets made are both someone else's.
    assert {quota: count for quota, count in in_use.items() if count} == {
        ON_DEMAND_STANDARD: 4, SPOT_STANDARD: 8, ON_DEMAND_GVT: 4, VPCS: 2, ELASTIC_IPS: 2,
        NAT_GATEWAYS: 1,
    }


@pytest.mark.moto
def test_an_unreadable_quota_fails_with_the_permission_to_grant(account: AwsAccount) -> None:
    scale = StackScale(pools=(), vpcs=1, elastic_ips=0, nat_gateways_per_az=0)
    with Stubber(account.client("service-quotas")) as quotas:
        quotas.add_client_error("get_service_quota", "AccessDeniedException", "no",
                                expected_params={"ServiceCode": "vpc", "QuotaCode": "L-F678F1CE"})
        [result] = check_quotas(account, scale, "dev")
    assert result.failed
    _one_line(result.detail)
    assert result.detail.startswith("cannot read the quota (AccessDeniedException)")
    assert "servicequotas:GetServiceQuota" in result.detail


LOW_QUOTAS = {  # quota code: applied value, or None for "no applied value" (default used)
    "L-1216C47A": 5.0,
    "L-34B43A08": None,
    "L-DB2E81BA": 0.0,
    "L-3819A6DF": 0.0,
    "L-F678F1CE": 5.0,
    "L-0263D0A3": 1.0,
    "L-FE5A380F": 5.0,
}
LOW_DEFAULTS = {"L-34B43A08": 5.0}


def _stub_quotas(stubber: Stubber, needs: list[Quota]) -> None:
    """Answer each quota read in order, checking the codes asked for."""
    for quota in needs:
        codes = {"ServiceCode": quota.service_code, "QuotaCode": quota.quota_code}
        value = LOW_QUOTAS[quota.quota_code]
        if value is None:
            stubber.add_client_error("get_service_quota", "NoSuchResourceException",
                                     "no applied value", expected_params=codes)
            stubber.add_response("get_aws_default_service_quota",
                                 {"Quota": {**codes, "Value": LOW_DEFAULTS[quota.quota_code]}},
                                 expected_params=codes)
        else:
            stubber.add_response("get_service_quota", {"Quota": {**codes, "Value": value}},
                                 expected_params=codes)


@pytest.mark.moto
def test_low_quota_account_names_each_short_quota_and_the_amount_needed(
    account: AwsAccount,
    dev_plan_resources: list[DeclaredResource],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The dev stack (issue 10's GPU pools included), against moto (STS, regions, instance
    types) with a new account's low quotas."""
    scale = scale_from_plan(dev_plan_resources)
    _executable(tmp_path, "pulumi", "echo alice")
    _executable(tmp_path, "kubectl", "exit 0")
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    needs = [need.quota for need in required_quotas(scale, load_vcpu_table())]
    with Stubber(account.client("service-quotas")) as quotas:
        _stub_quotas(quotas, needs)
        results = run_preflight("dev", "us-east-1", scale, [CLUSTER], account)
        quotas.assert_no_pending_responses()
    print(render_preflight(results, "dev", "us-east-1"))
    failed = {result.name: result.detail for result in failures(results)}
    assert set(failed) == {
        "on-demand standard vCPUs (L-1216C47A)",
        "spot standard vCPUs (L-34B43A08)",
        "on-demand G/VT vCPUs (L-DB2E81BA)",
        "spot G/VT vCPUs (L-3819A6DF)",
        "Elastic IPs (L-0263D0A3)",
    }
    expected = {
        "L-1216C47A": ("quota 5 (applied)", 64),
        "L-34B43A08": ("quota 5 (AWS default)", 96),
        "L-DB2E81BA": ("quota 0 (applied)", 4),
        "L-3819A6DF": ("quota 0 (applied)", 32),
        "L-0263D0A3": ("quota 1 (applied)", 2),
    }
    for name, detail in failed.items():
        _one_line(detail)
        code = name[-11:-1]
        value, amount = expected[code]
        assert detail.startswith(f"{value}, stack 'dev' needs {amount} at maximum scale")
        assert f"--quota-code {code} --desired-value {amount}" in detail
    passed = {r.name for r in results if r.status is Status.PASS}
    assert {"VPCs per region (L-F678F1CE)", "NAT gateways per Availability Zone (L-FE5A380F)",
            "AWS credentials", "region", "Pulumi CLI and backend", "kubectl"} <= passed


@pytest.mark.moto
def test_quotas_are_skipped_when_credentials_fail(
    isolated_aws: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    scale = StackScale(pools=(), vpcs=1, elastic_ips=0, nat_gateways_per_az=0)
    results = run_preflight("dev", "us-east-1", scale, [CLUSTER], AwsAccount("us-east-1"))
    by_name = {result.name: result for result in results}
    assert by_name["AWS credentials"].failed
    assert by_name["Service Quotas"].status is Status.SKIP
    assert by_name["Pulumi CLI and backend"].failed and by_name["kubectl"].failed
    report = render_preflight(results, "dev", "us-east-1")
    assert "3 check(s) failed" in report


def _run_task(body: Any, **flags: str) -> tuple[int, str]:
    """Run a task's body in this process (the plan's imports are already loaded): its exit
    code and what it printed or exited with."""
    try:
        body(Context(), **flags)
    except Exit as exited:
        return exited.code, str(exited.message)
    return 0, ""


@pytest.mark.moto
def test_invoke_preflight_exits_2_listing_each_failure(
    account: AwsAccount, moto_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`invoke preflight --stack dev` against moto, without Pulumi or kubectl installed: moto
    has no EC2 quota values to give, so those are unreadable; the VPC quotas pass."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # moto answers 500 for EC2 default quotas
    code, report = _run_task(tasks.preflight.body, stack="dev", endpoint_url=moto_endpoint)
    assert code == 2, report
    lines = report.splitlines()
    failed = [line for line in lines if line.startswith("  FAIL")]
    assert any("Pulumi CLI and backend: the Pulumi CLI is not installed" in x for x in failed)
    assert any("kubectl: kubectl is not on PATH" in x for x in failed)
    assert any(x.startswith("  FAIL  spot standard vCPUs (L-34B43A08): cannot read the quota")
               for x in failed)
    assert any(x.startswith("  ok    VPCs per region (L-F678F1CE): quota 5") for x in lines)
    assert lines[-1] == f"{len(failed)} check(s) failed: nothing was deployed; fix each line above"


@pytest.mark.moto
def test_invoke_leftovers_finds_a_planted_load_balancer_and_volume(
    account: AwsAccount, moto_endpoint: str
) -> None:
    """The task plans the dev stack offline for its cluster name (its outputs are gone after a
    destroy) and lists what Kubernetes left behind, exit 1; then, once they are gone, 0."""
    elb = account.client("elb")
    elb.create_load_balancer(
        LoadBalancerName="k8s-ray-head", AvailabilityZones=["us-east-1a"],
        Listeners=[{"Protocol": "TCP", "LoadBalancerPort": 8265, "InstancePort": 30265}],
        Tags=_tags({f"kubernetes.io/cluster/{CLUSTER}": "owned"}))
    ec2 = account.client("ec2")
    volume = ec2.create_volume(
        AvailabilityZone="us-east-1a", Size=20, TagSpecifications=[{
            "ResourceType": "volume",
            "Tags": _tags({f"kubernetes.io/cluster/{CLUSTER}": "owned",
                           "kubernetes.io/created-for/pvc/name": "checkpoints"})}])["VolumeId"]
    code, listing = _run_task(tasks.leftovers.body, stack="dev", endpoint_url=moto_endpoint)
    assert code == 1, listing
    assert ("    delete: aws elb delete-load-balancer --region us-east-1 "
            "--load-balancer-name k8s-ray-head") in listing
    assert f"    delete: aws ec2 delete-volume --region us-east-1 --volume-id {volume}" in listing
    assert listing.count("    delete: ") == 2
    elb.delete_load_balancer(LoadBalancerName="k8s-ray-head")
    ec2.delete_volume(VolumeId=volume)
    assert _run_task(tasks.leftovers.body, stack="dev", endpoint_url=moto_endpoint) == (0, "")


def test_a_bad_stack_config_fails_in_one_line_naming_the_key(
    isolated_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = with_admin_cidr_placeholder(read_stack_config("dev"))[0]
    monkeypatch.setattr(launch.account.stack, "read_stack_config",
                        lambda stack: {**raw, "spotburst:experiments": '["doll", "mars"]'})
    results, region = preflight_stack("dev", "http://127.0.0.1:9")
    assert region == "us-east-1"
    config = results[0]
    assert config.name == "stack config" and config.failed
    _one_line(config.detail)
    assert config.detail.startswith("spotburst:experiments: unknown experiment 'mars'")
    assert [r.status for r in results if r.name == "Service Quotas"] == [Status.SKIP]


def test_a_stack_without_a_region_is_not_planned_and_says_how_to_set_it(
    isolated_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = {k: v for k, v in read_stack_config("dev").items() if k != "aws:region"}
    monkeypatch.setattr(launch.account.stack, "read_stack_config", lambda stack: raw)
    results, region = preflight_stack("dev", "http://127.0.0.1:9")
    assert region is None
    by_name = {result.name: result for result in results}
    assert "stack config" not in by_name
    assert by_name["region"].detail == (
        "the stack has no aws:region: pulumi config set aws:region us-east-1 --stack dev")


# --- budget -------------------------------------------------------------------------------------


def test_budget_prints_both_ends_and_asks() -> None:
    said: list[str] = []
    asked: list[str] = []

    def answer(reply: str) -> Any:
        def ask(prompt: str) -> str:
            asked.append(prompt)
            return reply
        return ask

    assert confirm_budget(0.59, 5.11, yes=False, ask=answer("y"), say=said.append)
    assert said[0] == ("Hourly cost: $0.59 at minimum scale, $5.11 at maximum scale "
                       "(up to $122.64 per day while it runs at maximum)")
    assert asked == ["Deploy and start paying for this? [y/N] "]
    for reply in ("", "n", "no", "maybe"):
        assert not confirm_budget(0.59, 5.11, yes=False, ask=answer(reply), say=said.append)


def test_budget_with_yes_does_not_ask_and_no_terminal_means_no() -> None:
    def never(prompt: str) -> str:
        raise AssertionError("asked despite --yes")

    def closed(prompt: str) -> str:
        raise EOFError

    said: list[str] = []
    assert confirm_budget(1.0, 2.0, yes=True, ask=never, say=said.append)
    assert "$1.00 at minimum scale, $2.00 at maximum scale" in said[0]
    assert not confirm_budget(1.0, 2.0, yes=False, ask=closed, say=said.append)
    with pytest.raises(ValueError, match="minimum"):
        confirm_budget(3.0, 2.0, yes=True, say=said.append)


# --- leftovers ----------------------------------------------------------------------------------


def _tags(pairs: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": key, "Value": value} for key, value in pairs.items()]


def _subnets(account: AwsAccount) -> tuple[str, list[str]]:
    ec2 = account.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.42.{i}.0/24",
                          AvailabilityZone=f"us-east-1{zone}")["Subnet"]["SubnetId"]
        for i, zone in enumerate("ab")
    ]
    return vpc, subnets


@pytest.mark.moto
def test_leftovers_on_a_clean_account_say_nothing_left(account: AwsAccount) -> None:
    # Someone else's resources in the same region are not the stack's.
    ec2 = account.client("ec2")
    ec2.create_volume(AvailabilityZone="us-east-1a", Size=10, TagSpecifications=[
        {"ResourceType": "volume", "Tags": _tags({STACK_TAG_KEY: "prod"})}])
    account.client("elb").create_load_balancer(
        LoadBalancerName="other", AvailabilityZones=["us-east-1a"],
        Listeners=[{"Protocol": "TCP", "LoadBalancerPort": 80, "InstancePort": 80}],
        Tags=_tags({"kubernetes.io/cluster/other-cluster": "owned"}))
    report = find_leftovers(account, "dev", [CLUSTER])
    assert report.clean, render_leftovers(report)
    assert render_leftovers(report).startswith("nothing left: no EC2 instance, NAT gateway")


@pytest.mark.moto
def test_leftovers_find_what_kubernetes_and_the_stack_left(account: AwsAccount) -> None:
    ec2 = account.client("ec2")
    # What Kubernetes makes on its own: a Service's load balancer and a PVC's volume.
    account.client("elb").create_load_balancer(
        LoadBalancerName="a1b2c3d4", AvailabilityZones=["us-east-1a"],
        Listeners=[{"Protocol": "TCP", "LoadBalancerPort": 8265, "InstancePort": 30265}],
        Tags=_tags({f"kubernetes.io/cluster/{CLUSTER}": "owned",
                    "kubernetes.io/service-name": "ray/doll-head-svc"}))
    pvc_volume = ec2.create_volume(AvailabilityZone="us-east-1a", Size=20, TagSpecifications=[
        {"ResourceType": "volume", "Tags": _tags({
            f"kubernetes.io/cluster/{CLUSTER}": "owned",
            "kubernetes.io/created-for/pvc/name": "checkpoints",
            "kubernetes.io/created-for/pvc/namespace": "ray"})}])["VolumeId"]
    # What the stack itself left: a network load balancer, an address, a file system, a
    # cluster, an instance (and one the stack terminated, which costs nothing).
    vpc, subnets = _subnets(account)
    nlb = account.client("elbv2").create_load_balancer(
        Name="doll-nlb", Subnets=subnets, Type="network",
        Tags=_tags({"elbv2.k8s.aws/cluster": CLUSTER}))["LoadBalancers"][0]["LoadBalancerArn"]
    allocation = ec2.allocate_address(Domain="vpc", TagSpecifications=[
        {"ResourceType": "elastic-ip", "Tags": _tags(stack_tags("dev"))}])["AllocationId"]
    efs = account.client("efs")
    file_system = efs.create_file_system(
        CreationToken="burst-share", Tags=_tags({"project": "spotburst", "stack": "dev"})
    )["FileSystemId"]
    target = efs.create_mount_target(FileSystemId=file_system, SubnetId=subnets[0])
    account.client("eks").create_cluster(
        name=CLUSTER, roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": subnets})
    running, terminated = (
        ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="m5.xlarge",
                          TagSpecifications=[{"ResourceType": "instance",
                                              "Tags": _tags({"eks:cluster-name": CLUSTER})}]
                          )["Instances"][0]["InstanceId"]
        for _ in range(2)
    )
    ec2.terminate_instances(InstanceIds=[terminated])

    report = find_leftovers(account, "dev", [CLUSTER])
    assert report.unchecked == []
    found = {item.kind: item for item in report.leftovers}
    assert len(found) == len(report.leftovers) == 7
    assert {kind: item.resource_id for kind, item in found.items()} == {
        "classic load balancer": "a1b2c3d4",
        "EBS volume": f"{pvc_volume} (20 GiB)",
        "network load balancer": "doll-nlb",
        "Elastic IP": f"{found['Elastic IP'].resource_id.split(' ')[0]} ({allocation})",
        "EFS file system": file_system,
        "EKS cluster": CLUSTER,
        "EC2 instance": running,
    }
    commands = {kind: item.delete_command for kind, item in found.items()}
    assert commands["classic load balancer"] == (
        "aws elb delete-load-balancer --region us-east-1 --load-balancer-name a1b2c3d4")
    assert commands["EBS volume"] == (
        f"aws ec2 delete-volume --region us-east-1 --volume-id {pvc_volume}")
    assert commands["network load balancer"] == (
        f"aws elbv2 delete-load-balancer --region us-east-1 --load-balancer-arn {nlb}")
    assert commands["Elastic IP"] == (
        f"aws ec2 release-address --region us-east-1 --allocation-id {allocation}")
    assert commands["EFS file system"].startswith(
        f"aws efs delete-mount-target --region us-east-1 --mount-target-id "
        f"{target['MountTargetId']} && until ")
    assert commands["EFS file system"].endswith(
        f"aws efs delete-file-system --region us-east-1 --file-system-id {file_system}")
    assert re.fullmatch(r"available, holding \d+ bytes of data", found["EFS file system"].state)
    assert commands["EKS cluster"] == f"aws eks delete-cluster --region us-east-1 --name {CLUSTER}"
    assert commands["EC2 instance"] == (
        f"aws ec2 terminate-instances --region us-east-1 --instance-ids {running}")
    assert found["EBS volume"].why == f"cluster {CLUSTER}, made for PVC ray/checkpoints"
    assert found["classic load balancer"].why == (
        f"cluster {CLUSTER}, made for Service ray/doll-head-svc")
    rendered = render_leftovers(report)
    print(rendered)
    assert rendered.startswith("still billable in us-east-1, left by stack 'dev' / cluster")
    assert rendered.count("    delete: ") == 7


def test_an_unlistable_kind_is_reported_not_called_clean(
    account: AwsAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kind AWS refuses to list (no permission, say) stays unlisted: not 'nothing left'."""
    from botocore.exceptions import ClientError

    from launch.account import leftovers

    def refused(*args: object) -> Iterator[Leftover]:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}},
                          "DescribeFileSystems")

    monkeypatch.setattr(leftovers, "_file_systems", refused)
    report = find_leftovers(account, "dev", [CLUSTER])
    assert not report.clean and len(report.unchecked) == 1
    assert "not checked, list it yourself: EFS file systems" in render_leftovers(report)


def test_an_endpoint_that_does_not_answer_ends_the_listing_in_one_line(
    isolated_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing answers on the endpoint: no report of eight holes, one line naming it."""
    from botocore.exceptions import EndpointConnectionError

    from launch.errors import project_error

    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    endpoint = f"http://127.0.0.1:{free_local_port()}"
    with pytest.raises(EndpointConnectionError) as failed:
        find_leftovers(AwsAccount("us-east-1", endpoint), "dev", [CLUSTER])
    said = str(project_error(failed.value))
    assert endpoint in said and "\n" not in said
