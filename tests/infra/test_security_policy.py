"""Every declared resource of every stack passes the security policy, and each rule can fail."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from launch.offline import DeclaredResource, OfflineRun, run_offline
from stacks.config import KNOWN_EXPERIMENTS
from tests.infra.security_policy import violations


def test_dev_stack_passes_the_policy(dev_run: OfflineRun) -> None:
    assert violations(dev_run) == []


def test_every_experiment_enabled_passes_the_policy(dev_config: dict[str, str]) -> None:
    config = {**dev_config, "spotburst:experiments": json.dumps(list(KNOWN_EXPERIMENTS))}
    run = run_offline(config, "dev")
    assert set(run.config.experiments) == set(KNOWN_EXPERIMENTS)
    assert violations(run) == []


def test_admin_cidrs_open_the_eks_endpoint_to_those_sources_only(
    dev_config: dict[str, str],
) -> None:
    run = run_offline({**dev_config, "spotburst:adminCidrs": '["203.0.113.7/32"]'}, "dev")
    cluster = run.one("eks:index:Cluster").inputs
    assert cluster["endpointPublicAccess"] is True
    assert cluster["publicAccessCidrs"] == ["203.0.113.7/32"]
    assert violations(run) == []


def test_without_admin_cidrs_the_eks_endpoint_is_private(dev_run: OfflineRun) -> None:
    cluster = dev_run.one("eks:index:Cluster").inputs
    assert cluster["endpointPublicAccess"] is False
    assert cluster["endpointPrivateAccess"] is True


def _with(run: OfflineRun, resource_type: str, inputs: dict[str, Any]) -> OfflineRun:
    extra = DeclaredResource(
        urn=f"urn:test::{resource_type}::bad",
        resource_id="bad-id",
        type=resource_type,
        name="bad",
        parent_urn="",
        custom=True,
        inputs=inputs,
        dependencies=(),
    )
    return dataclasses.replace(run, resources=[*run.resources, extra])


def _without(run: OfflineRun, resource_type: str) -> OfflineRun:
    return dataclasses.replace(run, resources=[r for r in run.resources if r.type != resource_type])


def _wildcard_policy(action: str) -> dict[str, Any]:
    statement = {"Effect": "Allow", "Action": action, "Resource": "*"}
    return {"policy": json.dumps({"Version": "2012-10-17", "Statement": [statement]})}


BROKEN = {
    "ssh-from-anywhere": lambda run: _with(
        run,
        "aws:ec2/securityGroup:SecurityGroup",
        {
            "ingress": [
                {"fromPort": 22, "toPort": 22, "protocol": "tcp", "cidrBlocks": ["0.0.0.0/0"]}
            ]
        },
    ),
    "ipv6-rule-from-anywhere": lambda run: _with(
        run, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", {"cidrIpv6": "::/0"}
    ),
    "public-eks-endpoint": lambda run: _with(
        run, "eks:index:Cluster", {"endpointPublicAccess": True}
    ),
    "bucket-public-access-not-blocked": lambda run: _without(
        run, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
    ),
    "bucket-unencrypted": lambda run: _without(
        run,
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    ),
    "efs-unencrypted": lambda run: _with(
        run, "aws:efs/fileSystem:FileSystem", {"encrypted": False}
    ),
    "instance-imdsv1": lambda run: _with(
        run, "aws:ec2/instance:Instance", {"metadataOptions": {"httpTokens": "optional"}}
    ),
    "launch-template-imdsv1": lambda run: _with(run, "aws:ec2/launchTemplate:LaunchTemplate", {}),
    "node-group-imdsv1": lambda run: _with(
        run, "eks:index:ManagedNodeGroup", {"enableIMDSv2": False}
    ),
    "iam-star-on-star": lambda run: _with(
        run, "aws:iam/rolePolicy:RolePolicy", _wildcard_policy("*")
    ),
    "iam-s3-star-on-star": lambda run: _with(
        run, "aws:iam/rolePolicy:RolePolicy", _wildcard_policy("s3:*")
    ),
    "admin-policy-attached": lambda run: _with(
        run,
        "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
        {"policyArn": "arn:aws:iam::aws:policy/AdministratorAccess"},
    ),
    "secret-with-aws-keys": lambda run: _with(
        run, "kubernetes:core/v1:Secret", {"stringData": {"AWS_SECRET_ACCESS_KEY": "x"}}
    ),
    "access-key-id-in-env": lambda run: _with(
        run, "kubernetes:core/v1:ConfigMap", {"data": {"KEY": "AKIAABCDEFGHIJKLMNOP"}}
    ),
}


@pytest.mark.parametrize("breakage", BROKEN.values(), ids=BROKEN.keys())
def test_each_rule_catches_its_violation(dev_run: OfflineRun, breakage: Any) -> None:
    assert violations(breakage(dev_run)) != []
