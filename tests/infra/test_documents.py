"""The IAM documents and the data bucket, written out by hand: every statement, every
setting. Fast (the bucket component alone under mocks), so mutation testing can run it per
planted bug."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws
import pytest
from pulumi.runtime import mocks, rpc
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from components.data_bucket import DataBucket, DataBucketArgs
from components.iam_documents import (
    EC2_TRUST,
    bucket_read_write_policy,
    cluster_autoscaler_policy,
    secure_parameter_read_policy,
    web_identity_trust,
)
from launch.offline import DeclaredResource, _CloudMocks, _RecordingMonitor
from stacks.config_types import PROJECT

ARN = "arn:aws:s3:::spotburst-dev-mock"


def test_ec2_trust_lets_only_ec2_assume_the_role() -> None:
    assert json.loads(EC2_TRUST) == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "ec2.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }


def test_web_identity_trust_pins_one_service_account_and_the_sts_audience() -> None:
    provider = "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/AB"
    document = web_identity_trust(
        provider, "https://oidc.eks.us-east-1.amazonaws.com/id/AB", "system:serviceaccount:ray:doll"
    )
    assert json.loads(document) == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": provider},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {
                    "StringEquals": {
                        "oidc.eks.us-east-1.amazonaws.com/id/AB:sub": (
                            "system:serviceaccount:ray:doll"
                        ),
                        "oidc.eks.us-east-1.amazonaws.com/id/AB:aud": "sts.amazonaws.com",
                    }
                },
            }
        ],
    }
    # an issuer given without the scheme is used as is
    bare = json.loads(web_identity_trust(provider, "oidc.example/id/X", "s"))
    assert list(bare["Statement"][0]["Condition"]["StringEquals"]) == [
        "oidc.example/id/X:sub", "oidc.example/id/X:aud"]


def test_bucket_read_write_lists_the_bucket_and_touches_only_its_objects() -> None:
    assert json.loads(bucket_read_write_policy("arn:aws:s3:::b")) == {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": "arn:aws:s3:::b"},
            {
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                "Resource": "arn:aws:s3:::b/*",
            },
        ],
    }


def test_the_cluster_autoscaler_resizes_only_this_clusters_groups() -> None:
    assert json.loads(cluster_autoscaler_policy("spot")) == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ResizeThisClustersNodeGroups",
                "Effect": "Allow",
                "Action": [
                    "autoscaling:SetDesiredCapacity",
                    "autoscaling:TerminateInstanceInAutoScalingGroup",
                ],
                "Resource": "*",
                "Condition": {
                    "StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/spot": "owned"}
                },
            },
            {
                "Sid": "ReadNodeGroupShapes",
                "Effect": "Allow",
                "Action": [
                    "autoscaling:DescribeAutoScalingGroups",
                    "autoscaling:DescribeAutoScalingInstances",
                    "autoscaling:DescribeLaunchConfigurations",
                    "autoscaling:DescribeScalingActivities",
                    "autoscaling:DescribeTags",
                    "ec2:DescribeImages",
                    "ec2:DescribeInstanceTypes",
                    "ec2:DescribeLaunchTemplateVersions",
                    "ec2:GetInstanceTypesFromInstanceRequirements",
                ],
                "Resource": "*",
            },
            {
                "Sid": "DescribeThisClustersManagedNodeGroups",
                "Effect": "Allow",
                "Action": ["eks:DescribeNodegroup"],
                "Resource": "arn:aws:eks:*:*:nodegroup/spot/*",
            },
        ],
    }


def test_a_secure_parameter_is_read_with_its_key_and_nothing_else() -> None:
    parameter = "arn:aws:ssm:us-east-1:123456789012:parameter/spotburst/dev/ray-token"
    key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd"
    assert json.loads(secure_parameter_read_policy(parameter, key)) == {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["ssm:GetParameter"], "Resource": parameter},
            {"Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": key},
        ],
    }


def declare_bucket(versioning: bool, on_provider: bool = False) -> list[DeclaredResource]:
    """The DataBucket component alone, declared under mocks (given an explicit AWS provider,
    as the stack program does, when `on_provider`); what it registered."""
    monitor = _RecordingMonitor(_CloudMocks("us-east-1"))
    mocks.set_mocks(monitor.mocks, project=PROJECT, stack="dev", preview=False, monitor=monitor)
    args = DataBucketArgs(
        name_prefix="spotburst-dev",
        force_destroy=False,
        versioning=versioning,
        expire_results_after_days=30,
        tags={"project": "spotburst"},
    )

    def program() -> None:
        opts = None
        if on_provider:
            provider = aws.Provider("stack-aws", region="eu-west-1")
            opts = pulumi.ResourceOptions(providers={"aws": provider})
        DataBucket("data", args, opts)

    _sync_await(run_pulumi_func(program))
    return list(monitor.declared)


# Declared anew for each test (a tenth of a second): mutation testing runs, for a planted
# bug, only the tests during which the changed function ran, and a module-scoped fixture
# would run it only during the first test.
@pytest.fixture
def declared() -> list[DeclaredResource]:
    return declare_bucket(versioning=True)


@pytest.fixture
def bucket_resources(declared: list[DeclaredResource]) -> dict[str, DeclaredResource]:
    return {resource.name: resource for resource in declared if resource.custom}


def test_the_bucket_component_declares_exactly_these(declared: list[DeclaredResource]) -> None:
    [component] = [r for r in declared if not r.custom]
    assert component.type == "spotburst:storage:DataBucket" and component.name == "data"
    children = [r for r in declared if r.custom]
    assert all(r.parent_urn == component.urn for r in children)
    assert {r.name: r.type for r in children} == {
        "data": "aws:s3/bucket:Bucket",
        "data-public-access": "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
        "data-ownership": "aws:s3/bucketOwnershipControls:BucketOwnershipControls",
        "data-encryption": "aws:s3/bucketServerSideEncryptionConfiguration:"
        "BucketServerSideEncryptionConfiguration",
        "data-tls-only": "aws:s3/bucketPolicy:BucketPolicy",
        "data-versioning": "aws:s3/bucketVersioning:BucketVersioning",
        "data-expire-results": "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
    }


def _inputs(resources: dict[str, DeclaredResource], name: str) -> dict[str, Any]:
    return resources[name].inputs


def test_the_bucket_is_private_encrypted_and_owner_enforced(
    bucket_resources: dict[str, DeclaredResource],
) -> None:
    bucket = next(r for r in bucket_resources.values() if r.type == "aws:s3/bucket:Bucket")
    assert bucket.inputs == {
        "bucketPrefix": "spotburst-dev-", "forceDestroy": False, "tags": {"project": "spotburst"}}
    bucket_id = bucket.resource_id
    assert _inputs(bucket_resources, "data-public-access") == {
        "bucket": bucket_id, "blockPublicAcls": True, "blockPublicPolicy": True,
        "ignorePublicAcls": True, "restrictPublicBuckets": True}
    assert _inputs(bucket_resources, "data-ownership") == {
        "bucket": bucket_id, "rule": {"objectOwnership": "BucketOwnerEnforced"}}
    assert _inputs(bucket_resources, "data-encryption") == {
        "bucket": bucket_id,
        "rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]}
    assert _inputs(bucket_resources, "data-expire-results") == {
        "bucket": bucket_id,
        "rules": [{"id": "expire-results", "status": "Enabled", "filter": {"prefix": "results/"},
                   "expiration": {"days": 30}}]}
    assert _inputs(bucket_resources, "data-versioning") == {
        "bucket": bucket_id, "versioningConfiguration": {"status": "Enabled"}}


def test_the_bucket_policy_denies_everything_without_tls(
    bucket_resources: dict[str, DeclaredResource],
) -> None:
    policy = _inputs(bucket_resources, "data-tls-only")
    assert policy["bucket"] == "spotburst-dev-mock"
    assert json.loads(policy["policy"]) == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DenyInsecureTransport",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [ARN, f"{ARN}/*"],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ],
    }


def test_versioning_off_is_suspended() -> None:
    resources = {r.name: r for r in declare_bucket(versioning=False) if r.custom}
    assert _inputs(resources, "data-versioning")["versioningConfiguration"] == {
        "status": "Suspended"}


def test_every_bucket_resource_goes_through_the_provider_it_is_given() -> None:
    """The stack hands its AWS provider (its region, its default tags: how `invoke destroy`
    finds what is left) to the component: every resource in it must use that provider."""
    declared = declare_bucket(versioning=True, on_provider=True)
    [provider] = [r for r in declared if r.type == "pulumi:providers:aws"]
    reference = f"{provider.urn}::{provider.resource_id}"
    bucket_parts = [r for r in declared if r.type.startswith("aws:s3/")]
    assert len(bucket_parts) == 7
    assert {r.name: r.provider for r in bucket_parts} == {r.name: reference for r in bucket_parts}


class _OutputsMonitor(_RecordingMonitor):
    """Also keeps what each component registered as its outputs."""

    def __init__(self) -> None:
        super().__init__(_CloudMocks("us-east-1"))
        self.registered_outputs: dict[str, Any] = {}

    def RegisterResourceOutputs(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        self.registered_outputs[request.urn] = rpc.deserialize_properties(request.outputs)
        return super().RegisterResourceOutputs(request)


def test_the_component_hands_out_the_bucket_name_and_arn() -> None:
    """What the stack exports (the bucket name) and what the pods' IAM policies are scoped
    to (the ARN) come from these two outputs."""
    monitor = _OutputsMonitor()
    mocks.set_mocks(monitor.mocks, project=PROJECT, stack="dev", preview=False, monitor=monitor)
    args = DataBucketArgs(name_prefix="spotburst-dev", force_destroy=False, versioning=True,
                          expire_results_after_days=30)
    seen: dict[str, str] = {}

    def program() -> None:
        bucket = DataBucket("data", args)
        bucket.bucket_name.apply(lambda name: seen.setdefault("name", name))
        bucket.bucket_arn.apply(lambda arn: seen.setdefault("arn", arn))

    _sync_await(run_pulumi_func(program))
    assert seen == {"name": "spotburst-dev-mock", "arn": ARN}
    [component] = [r for r in monitor.declared if r.type == "spotburst:storage:DataBucket"]
    assert monitor.registered_outputs[component.urn] == {
        "bucket_name": "spotburst-dev-mock", "bucket_arn": ARN}
