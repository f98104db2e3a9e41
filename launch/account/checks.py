"""Preflight: what must hold before `pulumi up` creates the first billable resource.

Each check returns one `CheckResult`; a failing one carries ONE line that says how to fix it.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
    SSOError,
    TokenRetrievalError,
)

from launch import pulumi_cli
from launch.account.aws import AwsAccount
from launch.account.scale import (
    Quota,
    QuotaNeed,
    StackScale,
    instance_types_of,
    required_quotas,
)
from launch.account.usage import resolve_vcpus, usage_by_others
from vocab.errors import RunFailed

AWS_LOGIN_HINT = (
    "run `aws configure`, or `aws sso login --profile NAME` and `export AWS_PROFILE=NAME`"
)
KUBECTL_HINT = (
    "install kubectl (https://kubernetes.io/docs/tasks/tools/), needed to reach the EKS cluster"
)
AWS_CLI_HINT = (
    "install the AWS CLI v2 (https://docs.aws.amazon.com/cli/latest/userguide/"
    "getting-started-install.html), needed to reach the burst nodes through SSM"
)
SSM_PLUGIN_HINT = (
    "install the AWS CLI's Session Manager plugin (https://docs.aws.amazon.com/"
    "systems-manager/latest/userguide/session-manager-working-with-install-plugin.html), "
    "needed for run-burst --stack"
)
_REJECTED = {"InvalidClientTokenId", "SignatureDoesNotMatch", "AuthFailure", "UnrecognizedClient"}
_EXPIRED = {"ExpiredToken", "ExpiredTokenException", "RequestExpired"}


class Status(Enum):
    PASS = "ok"
    FAIL = "FAIL"
    SKIP = "skip"


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    detail: str  # passed: what was found; failed: one line with the fix; skipped: why

    @property
    def failed(self) -> bool:
        return self.status is Status.FAIL


def _pass(name: str, detail: str) -> CheckResult:
    return CheckResult(name, Status.PASS, detail)


def _fail(name: str, detail: str) -> CheckResult:
    return CheckResult(name, Status.FAIL, detail)


# --- credentials, region, tools ---------------------------------------------------------------


def check_credentials(account: AwsAccount) -> CheckResult:
    """The ambient AWS credentials resolve to an identity (STS GetCallerIdentity)."""
    name = "AWS credentials"
    try:
        identity = account.account_wide().client("sts").get_caller_identity()
    except ProfileNotFound as error:
        return _fail(name, f"{error}: create it with `aws configure --profile NAME` or unset it")
    except NoCredentialsError:
        return _fail(name, f"no AWS credentials found: {AWS_LOGIN_HINT}")
    except PartialCredentialsError as error:
        return _fail(name, f"incomplete AWS credentials ({error}): {AWS_LOGIN_HINT}")
    except (TokenRetrievalError, SSOError) as error:
        return _fail(name, f"the SSO session cannot give credentials ({error}): `aws sso login`")
    except EndpointConnectionError as error:
        return _fail(name, f"cannot reach AWS STS ({error}): check the network or proxy")
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        if code in _EXPIRED:
            return _fail(name, f"the AWS credentials have expired ({code}): refresh them, e.g. "
                         "`aws sso login`, or get a new session token")
        if code in _REJECTED:
            return _fail(name, f"AWS rejected the credentials ({code}): {AWS_LOGIN_HINT}")
        return _fail(name, f"STS GetCallerIdentity failed ({code}): {AWS_LOGIN_HINT}")
    except BotoCoreError as error:
        return _fail(name, f"{error}: {AWS_LOGIN_HINT}")
    return _pass(name, f"{identity['Arn']} (account {identity['Account']})")


def check_region(region: str | None, stack: str, account: AwsAccount | None) -> CheckResult:
    """The stack sets `aws:region`, and (given an account to ask) the account may use it."""
    name = "region"
    fix = f"pulumi config set aws:region us-east-1 --stack {stack}"
    if not region:
        return _fail(name, f"the stack has no aws:region: {fix}")
    if account is None:
        return _pass(name, f"{region} (not verified: no AWS credentials)")
    try:
        ec2 = account.account_wide().client("ec2")
        regions = ec2.describe_regions(AllRegions=True)["Regions"]
    except (BotoCoreError, ClientError) as error:
        return _fail(
            name, f"cannot list the account's regions ({error}): allow ec2:DescribeRegions"
        )
    status = {entry["RegionName"]: entry.get("OptInStatus", "") for entry in regions}
    if region not in status:
        return _fail(name, f"aws:region {region!r} is not an AWS region: {fix}")
    if status[region] == "not-opted-in":
        return _fail(name, f"region {region} is not enabled for this account: enable it "
                     f"(aws account enable-region --region-name {region}) or pick another: {fix}")
    return _pass(name, region)


def check_pulumi_backend() -> CheckResult:
    """The Pulumi CLI is on PATH and logged in to a backend (`pulumi whoami`)."""
    name = "Pulumi CLI and backend"
    try:
        user = pulumi_cli.backend_user()
    except pulumi_cli.PulumiCliMissing as missing:
        return _fail(name, str(missing))
    except pulumi_cli.PulumiNotLoggedIn as reason:
        return _fail(name, f"not logged in to a Pulumi backend ({reason}): run `pulumi login` "
                     "(Pulumi Cloud) or `pulumi login s3://BUCKET` / `pulumi login --local`")
    return _pass(name, f"logged in as {user}")


def check_kubectl(eks_enabled: bool) -> CheckResult:
    return _check_tool("kubectl", "kubectl", KUBECTL_HINT, eks_enabled, "no EKS experiment enabled")


def check_burst_tools(burst_enabled: bool) -> list[CheckResult]:
    """The AWS CLI and its Session Manager plugin, which `run-burst --stack` starts for its
    tunnel to the burst login node (`aws ssm start-session`)."""
    why_not = "the burst experiment is not enabled"
    return [_check_tool("AWS CLI", "aws", AWS_CLI_HINT, burst_enabled, why_not),
            _check_tool("Session Manager plugin", "session-manager-plugin", SSM_PLUGIN_HINT,
                        burst_enabled, why_not)]


def _check_tool(name: str, program: str, hint: str, needed: bool, why_not: str) -> CheckResult:
    if not needed:
        return CheckResult(name, Status.SKIP, why_not)
    found = shutil.which(program)
    if found is None:
        return _fail(name, f"{program} is not on PATH: {hint}")
    return _pass(name, found)


# --- Service Quotas ---------------------------------------------------------------------------


class QuotaUnreadable(RunFailed, RuntimeError):
    pass


def read_quota(quotas_client: Any, quota: Quota) -> tuple[float, str]:
    """The quota's value and where it came from: the account's applied value, or AWS's
    default when Service Quotas has none applied."""
    codes = {"ServiceCode": quota.service_code, "QuotaCode": quota.quota_code}
    try:
        return float(quotas_client.get_service_quota(**codes)["Quota"]["Value"]), "applied"
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "NoSuchResourceException":
            raise QuotaUnreadable(_client_error_code(error)) from error
    try:
        return float(quotas_client.get_aws_default_service_quota(**codes)["Quota"]["Value"]), (
            "AWS default"
        )
    except ClientError as error:
        raise QuotaUnreadable(_client_error_code(error)) from error


def _client_error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code") or error)


def check_quotas(
    account: AwsAccount, scale: StackScale, stack: str, cluster_names: Sequence[str] = ()
) -> list[CheckResult]:
    """One result per quota the stack needs at maximum scale, counting what other resources in
    the region already use; plus one per resource the preflight cannot size."""
    results = [
        _fail(f"quota for {unsized}", "the preflight cannot size it at maximum scale: teach "
              "launch/account/scale.py (scale_from_plan) its largest count")
        for unsized in scale.unsized
    ]
    try:
        vcpus = resolve_vcpus(account.client("ec2"), instance_types_of(scale))
        needs = required_quotas(scale, vcpus)
    except ValueError as error:
        return [*results, _fail("vCPU quotas", f"{error}: add it to "
                                "vocab/instances.json or change the stack config")]
    if not needs:
        return results
    try:
        in_use = usage_by_others(account, stack, cluster_names, vcpus)
    except (BotoCoreError, ClientError) as error:
        in_use = Counter()
        results.append(_fail("quota usage", f"cannot count what else uses the quotas ({error}): "
                             "allow ec2:DescribeInstances, ec2:DescribeVpcs, "
                             "ec2:DescribeAddresses, ec2:DescribeNatGateways, ec2:DescribeSubnets"))
    quotas_client = account.client("service-quotas")
    for need in needs:
        results.append(
            _check_one_quota(quotas_client, need, in_use[need.quota], account.region or "", stack)
        )
    return results


def _check_one_quota(
    quotas_client: Any, need: QuotaNeed, in_use: int, region: str, stack: str
) -> CheckResult:
    quota = need.quota
    name = f"{quota.label} ({quota.quota_code})"
    try:
        value, source = read_quota(quotas_client, quota)
    except QuotaUnreadable as reason:
        return _fail(name, f"cannot read the quota ({reason}): allow servicequotas:GetServiceQuota "
                     f"and servicequotas:GetAWSDefaultServiceQuota, or check it yourself: "
                     f"aws service-quotas get-service-quota --region {region} "
                     f"--service-code {quota.service_code} --quota-code {quota.quota_code}")
    total = need.amount + in_use
    others = f" + {in_use} in use by other resources" if in_use else ""
    if value >= total:
        return _pass(name, f"quota {value:g} ({source}) covers the {need.amount} needed{others}")
    return _fail(
        name,
        f"quota {value:g} ({source}), stack {stack!r} needs {need.amount} at maximum scale "
        f"({need.basis}){others}; ask for {total}: aws service-quotas "
        f"request-service-quota-increase --region {region} --service-code {quota.service_code} "
        f"--quota-code {quota.quota_code} --desired-value {total} "
        f"(or lower the stack's maximum sizes)",
    )


# --- all of them ------------------------------------------------------------------------------


def run_preflight(
    stack: str,
    region: str | None,
    scale: StackScale | None,
    cluster_names: Sequence[str],
    account: AwsAccount,
    burst_enabled: bool = False,
) -> list[CheckResult]:
    """Every check; kubectl is needed when the stack has EKS clusters, the AWS CLI and its
    Session Manager plugin when it has the burst experiment. The quotas are skipped without a
    scale (the stack could not be planned) or when the credentials or region fail."""
    credentials = check_credentials(account)
    region_result = check_region(region, stack, None if credentials.failed else account)
    results = [
        credentials, region_result, check_pulumi_backend(), check_kubectl(bool(cluster_names)),
        *check_burst_tools(burst_enabled),
    ]
    if scale is None:
        results.append(CheckResult("Service Quotas", Status.SKIP, "the stack could not be planned"))
    elif credentials.failed or region_result.failed:
        results.append(
            CheckResult("Service Quotas", Status.SKIP, "needs working AWS credentials and a region")
        )
    else:
        results += check_quotas(account, scale, stack, cluster_names)
    return results


def failures(results: Iterable[CheckResult]) -> list[CheckResult]:
    return [result for result in results if result.failed]


def render_preflight(results: list[CheckResult], stack: str, region: str | None) -> str:
    lines = [f"preflight for stack {stack!r} in {region or '(no region)'}:"]
    for result in results:
        lines.append(f"  {result.status.value:<4}  {result.name}: {result.detail}")
    failed = failures(results)
    if failed:
        lines.append(f"{len(failed)} check(s) failed: nothing was deployed; fix each line above")
    else:
        lines.append("all checks passed")
    return "\n".join(lines)
