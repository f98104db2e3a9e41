"""Every declared resource of every stack passes the security policy, and each rule can fail."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest

from launch.offline import DeclaredResource, OfflineRun
from stacks.config_types import KNOWN_EXPERIMENTS
from stacks.fields import ConfigError
from tests.helpers.offline_cache import cached_run
from tests.infra.security_policy import Violation, fired, violations


@pytest.fixture
def dev_run() -> OfflineRun:
    return cached_run()


def test_dev_stack_passes_the_policy(dev_run: OfflineRun) -> None:
    assert violations(dev_run) == []


def test_every_experiment_enabled_passes_the_policy() -> None:
    run = cached_run({"spotburst:experiments": json.dumps(list(KNOWN_EXPERIMENTS))})
    assert set(run.config.experiments) == set(KNOWN_EXPERIMENTS)
    assert violations(run) == []


def test_admin_cidrs_open_the_eks_endpoint_to_those_sources_only() -> None:
    run = cached_run({"spotburst:adminCidrs": '["203.0.113.7/32"]'})
    cluster = run.one("eks:index:Cluster").inputs
    assert cluster["endpointPublicAccess"] is True
    assert cluster["publicAccessCidrs"] == ["203.0.113.7/32"]
    assert violations(run) == []


def test_a_private_api_endpoint_has_no_public_access_and_needs_no_admin_cidrs() -> None:
    run = cached_run({"spotburst:adminCidrs": "[]", "spotburst:apiEndpoint": "private"})
    cluster = run.one("eks:index:Cluster").inputs
    assert cluster["endpointPublicAccess"] is False
    assert cluster["endpointPrivateAccess"] is True
    assert violations(run) == []


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


def _edited(
    run: OfflineRun, resource_type: str, name: str, key: str, change: Callable[[Any], None]
) -> OfflineRun:
    """The run with one declared resource's JSON document input `key` changed in place."""
    def edit(resource: DeclaredResource) -> DeclaredResource:
        if (resource.type, resource.name) != (resource_type, name):
            return resource
        document = json.loads(resource.inputs[key])
        change(document)
        return dataclasses.replace(resource, inputs={**resource.inputs, key: json.dumps(document)})

    edited = [edit(resource) for resource in run.resources]
    assert edited != run.resources, f"no {resource_type} {name} in the run"
    return dataclasses.replace(run, resources=edited)


def _set_input(run: OfflineRun, resource_type: str, name: str, **values: Any) -> OfflineRun:
    """The run with plain inputs of one declared resource replaced."""
    edited = [
        dataclasses.replace(r, inputs={**r.inputs, **values})
        if (r.type, r.name) == (resource_type, name) else r
        for r in run.resources
    ]
    assert edited != run.resources, f"no {resource_type} {name} in the run"
    return dataclasses.replace(run, resources=edited)


def _statement(index: int, **values: Any) -> Callable[[Any], None]:
    return lambda document: document["Statement"][index].update(values)


def _wildcard_policy(action: str, resource: str = "*") -> dict[str, Any]:
    statement = {"Effect": "Allow", "Action": action, "Resource": resource}
    return {"policy": json.dumps({"Version": "2012-10-17", "Statement": [statement]})}


def _trust(statement: dict[str, Any]) -> dict[str, Any]:
    document = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", **statement}]}
    return {"assumeRolePolicy": json.dumps(document)}


ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ROLE = "aws:iam/role:Role"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
FIS_TEMPLATE = "aws:fis/experimentTemplate:ExperimentTemplate"
FIS_ROLE = "spot-interruptions-fis"
FIS_POLICY = "spot-interruptions-fis-interrupt"
FIS_CPU = "spot-interruptions-spot-cpu"
EFS_CSI_POLICY = "shared-data-efs-csi-efs"


def _fis_target(**values: Any) -> Callable[[OfflineRun], OfflineRun]:
    def edit(run: OfflineRun) -> OfflineRun:
        template = run.one(FIS_TEMPLATE, FIS_CPU)
        (target,) = template.inputs["targets"]
        return _set_input(run, FIS_TEMPLATE, FIS_CPU, targets=[{**target, **values}])
    return edit
OIDC = "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/X"

# Each breakage of the real dev stack -> exactly the rules that must fire.
BROKEN: dict[str, tuple[Callable[[OfflineRun], OfflineRun], set[str]]] = {
    "s3-star-on-the-bucket": (
        lambda run: _edited(run, ROLE_POLICY, "doll-ray-pods-bucket", "policy",
                            _statement(1, Action="s3:*")),
        {"iam-wildcard-action"},
    ),
    "s3-star-on-the-bucket-for-burst-nodes": (
        lambda run: _edited(run, ROLE_POLICY, "burst-nodes-bucket", "policy",
                            _statement(0, Action=["s3:ListBucket", "s3:*"])),
        {"iam-wildcard-action"},
    ),
    "any-aws-principal-in-a-trust-policy": (
        lambda run: _edited(run, ROLE, "burst-nodes", "assumeRolePolicy",
                            _statement(0, Principal={"AWS": "*"})),
        {"trust-any-principal"},
    ),
    "star-principal-in-a-trust-policy": (
        lambda run: _edited(run, ROLE, "eks-node-role", "assumeRolePolicy",
                            _statement(0, Principal="*")),
        {"trust-any-principal"},
    ),
    "web-identity-without-sub": (
        lambda run: _edited(run, ROLE, "doll-ray-pods", "assumeRolePolicy",
                            lambda doc: doc["Statement"][0].update(Condition={"StringEquals": {
                                k: v for k, v in doc["Statement"][0]["Condition"]
                                ["StringEquals"].items() if k.endswith(":aud")}})),
        {"trust-federated-unscoped"},
    ),
    "web-identity-for-any-subject": (
        lambda run: _with(run, ROLE, _trust({
            "Principal": {"Federated": OIDC}, "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {"StringLike": {"oidc.eks/id/X:sub": "*", "oidc.eks/id/X:aud": "sts"}},
        })),
        {"trust-federated-unscoped"},
    ),
    "web-identity-without-condition": (
        lambda run: _with(run, ROLE, _trust({
            "Principal": {"Federated": OIDC}, "Action": "sts:AssumeRoleWithWebIdentity"})),
        {"trust-federated-unscoped"},
    ),
    "tls-deny-flipped-to-allow": (
        lambda run: _edited(run, BUCKET_POLICY, "data-tls-only", "policy",
                            _statement(0, Effect="Allow")),
        # an Allow of s3:* to everyone is also a wildcard grant
        {"bucket-tls-only", "iam-wildcard-action"},
    ),
    "tls-deny-only-on-the-objects": (
        lambda run: _edited(run, BUCKET_POLICY, "data-tls-only", "policy",
                            lambda doc: doc["Statement"][0].update(
                                Resource=doc["Statement"][0]["Resource"][1:])),
        {"bucket-tls-only"},
    ),
    "tls-deny-for-tls-traffic": (
        lambda run: _edited(run, BUCKET_POLICY, "data-tls-only", "policy",
                            _statement(0, Condition={"Bool": {"aws:SecureTransport": "true"}})),
        {"bucket-tls-only"},
    ),
    "tls-deny-of-reads-only": (
        lambda run: _edited(run, BUCKET_POLICY, "data-tls-only", "policy",
                            _statement(0, Action="s3:GetObject")),
        {"bucket-tls-only"},
    ),
    "tls-deny-for-one-principal-only": (
        lambda run: _edited(run, BUCKET_POLICY, "data-tls-only", "policy",
                            _statement(0, Principal={"AWS": "arn:aws:iam::123456789012:root"})),
        {"bucket-tls-only"},
    ),
    "tls-deny-without-condition": (
        lambda run: _edited(run, BUCKET_POLICY, "data-tls-only", "policy",
                            lambda doc: doc["Statement"][0].pop("Condition")),
        {"bucket-tls-only"},
    ),
    "tls-deny-on-another-bucket": (
        lambda run: _edited(run, BUCKET_POLICY, "data-tls-only", "policy",
                            _statement(0, Resource=["arn:aws:s3:::other",
                                                    "arn:aws:s3:::other/*"])),
        {"bucket-tls-only"},
    ),
    "no-bucket-policy": (lambda run: _without(run, BUCKET_POLICY), {"bucket-tls-only"}),
    "bucket-policy-not-an-object": (
        lambda run: _set_input(run, BUCKET_POLICY, "data-tls-only", policy="[]"),
        {"bucket-tls-only"},
    ),
    "bucket-policy-for-another-bucket": (
        lambda run: _set_input(run, BUCKET_POLICY, "data-tls-only", bucket="other"),
        {"bucket-tls-only"},
    ),
    "security-group-rule-from-anywhere": (
        lambda run: _with(run, "aws:ec2/securityGroupRule:SecurityGroupRule", {
            "type": "ingress", "fromPort": 22, "toPort": 22, "cidrBlocks": ["0.0.0.0/0"]}),
        {"world-ingress"},
    ),
    "security-group-rule-from-anywhere-ipv6": (
        lambda run: _with(run, "aws:ec2/securityGroupRule:SecurityGroupRule", {
            "type": "ingress", "fromPort": 22, "toPort": 22, "ipv6CidrBlocks": ["::/0"]}),
        {"world-ingress"},
    ),
    "security-group-ipv6-from-anywhere": (
        lambda run: _with(run, "aws:ec2/securityGroup:SecurityGroup", {"ingress": [
            {"fromPort": 22, "toPort": 22, "protocol": "tcp", "ipv6CidrBlocks": ["::/0"]}]}),
        {"world-ingress"},
    ),
    "ipv4-rule-from-anywhere": (
        lambda run: _with(run, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
                          {"cidrIpv4": "0.0.0.0/0"}),
        {"world-ingress"},
    ),
    "ingress-from-both-halves-of-the-internet": (
        lambda run: _with(run, "aws:ec2/securityGroupRule:SecurityGroupRule", {
            "type": "ingress", "fromPort": 22, "toPort": 22,
            "cidrBlocks": ["0.0.0.0/1", "128.0.0.0/1"]}),
        {"world-ingress"},
    ),
    "ingress-from-two-public-slash-8s": (
        lambda run: _with(run, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
                          {"cidrIpv4": "8.0.0.0/7"}),
        {"world-ingress"},
    ),
    "ingress-from-an-eighth-of-ipv6": (
        lambda run: _with(run, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
                          {"cidrIpv6": "2000::/3"}),
        {"world-ingress"},
    ),
    "eks-endpoint-public-by-default": (
        # endpointPublicAccess left out: EKS makes the endpoint public
        lambda run: _with(run, "eks:index:Cluster", {}),
        {"world-ingress", "eks_secrets_use_kms", "ray_namespaces_have_network_policy"},
    ),
    "bucket-public-policy-allowed": (
        lambda run: _set_input(run, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
                               "data-public-access", blockPublicPolicy=False),
        {"bucket-public-access"},
    ),
    "ssh-from-anywhere": (
        lambda run: _with(run, "aws:ec2/securityGroup:SecurityGroup", {"ingress": [
            {"fromPort": 22, "toPort": 22, "protocol": "tcp", "cidrBlocks": ["0.0.0.0/0"]}]}),
        {"world-ingress"},
    ),
    "ipv6-rule-from-anywhere": (
        lambda run: _with(run, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
                          {"cidrIpv6": "::/0"}),
        {"world-ingress"},
    ),
    "public-eks-endpoint": (
        lambda run: _with(run, "eks:index:Cluster", {"endpointPublicAccess": True}),
        # the bare extra cluster also lacks the cluster policy's KMS and network policies
        {"world-ingress", "eks_secrets_use_kms", "ray_namespaces_have_network_policy"},
    ),
    "bucket-public-access-not-blocked": (
        lambda run: _without(run, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"),
        {"bucket-public-access"},
    ),
    "bucket-unencrypted": (
        lambda run: _without(run, "aws:s3/bucketServerSideEncryptionConfiguration:"
                             "BucketServerSideEncryptionConfiguration"),
        {"bucket-encryption"},
    ),
    "efs-unencrypted": (
        lambda run: _with(run, "aws:efs/fileSystem:FileSystem", {"encrypted": False}),
        {"efs-encryption"},
    ),
    "efs-encryption-left-out": (
        lambda run: _set_input(run, "aws:efs/fileSystem:FileSystem", "burst-cloud-efs",
                               encrypted=None),
        {"efs-encryption"},
    ),
    "nfs-from-a-public-block": (
        lambda run: _set_input(run, SECURITY_GROUP, "shared-data-nfs", ingress=[
            {"protocol": "tcp", "fromPort": 2049, "toPort": 2049,
             "cidrBlocks": ["198.51.100.0/24"]}]),
        {"efs-nfs-scope"},
    ),
    "more-than-nfs-to-a-file-system": (
        lambda run: _set_input(run, SECURITY_GROUP, "burst-cloud-nfs", ingress=[
            {"protocol": "-1", "fromPort": 0, "toPort": 0, "cidrBlocks": ["10.1.0.0/16"]}]),
        {"efs-nfs-scope"},
    ),
    "instance-without-metadata-options": (
        lambda run: _set_input(run, "aws:ec2/instance:Instance", "burst-cloud-0",
                               metadataOptions=None),
        {"imdsv2"},
    ),
    "node-group-launch-template-left-out": (
        lambda run: _set_input(run, "eks:index:ManagedNodeGroup", "eks-spot-cpu",
                               launchTemplate=None),
        {"imdsv2"},
    ),
    "node-group-launch-template-not-declared": (
        lambda run: _set_input(run, "eks:index:ManagedNodeGroup", "eks-spot-cpu",
                               launchTemplate={"id": "lt-elsewhere", "version": "1"}),
        {"imdsv2"},
    ),
    "node-launch-template-imdsv1": (
        lambda run: _set_input(run, "aws:ec2/launchTemplate:LaunchTemplate",
                               "eks-spot-cpu-nodes", metadataOptions={"httpTokens": "optional"}),
        {"imdsv2"},
    ),
    "instance-imdsv1": (
        lambda run: _with(run, "aws:ec2/instance:Instance",
                          {"metadataOptions": {"httpTokens": "optional"}}),
        {"imdsv2"},
    ),
    "launch-template-imdsv1": (
        lambda run: _with(run, "aws:ec2/launchTemplate:LaunchTemplate", {}), {"imdsv2"}),
    "node-group-imdsv1": (
        lambda run: _with(run, "eks:index:ManagedNodeGroup", {"enableIMDSv2": False}),
        {"imdsv2"},
    ),
    "iam-star-on-star": (
        lambda run: _with(run, ROLE_POLICY, _wildcard_policy("*")),
        # "*" also reads the burst token and writes any autoscaling group
        {"iam-wildcard-action", "burst_token_is_readable_by_burst_nodes_only",
         "autoscaling_is_scoped_to_this_cluster"}),
    "iam-ec2-star-on-one-instance": (
        lambda run: _with(run, ROLE_POLICY, _wildcard_policy(
            "ec2:*", "arn:aws:ec2:us-east-1:123456789012:instance/i-1")),
        {"iam-wildcard-action"},
    ),
    "iam-not-action": (
        lambda run: _with(run, "aws:iam/policy:Policy", {"policy": json.dumps({"Statement": [
            {"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}]})}),
        {"iam-wildcard-action"},
    ),
    "s3-star-in-a-role-inline-policy": (
        lambda run: _with(run, ROLE, {**_trust({"Principal": {"Service": "ec2.amazonaws.com"},
                                                "Action": "sts:AssumeRole"}),
                                      "inlinePolicies": [{"name": "p", **_wildcard_policy(
                                          "s3:*", "arn:aws:s3:::b")}]}),
        {"iam-wildcard-action"},
    ),
    "s3-star-in-a-user-policy": (
        lambda run: _with(run, "aws:iam/userPolicy:UserPolicy", _wildcard_policy("s3:*")),
        {"iam-wildcard-action"},
    ),
    "s3-star-in-a-group-policy": (
        lambda run: _with(run, "aws:iam/groupPolicy:GroupPolicy", _wildcard_policy("s3:*")),
        {"iam-wildcard-action"},
    ),
    "s3-star-as-the-only-statement-not-in-a-list": (
        lambda run: _with(run, ROLE_POLICY, {"policy": json.dumps({"Statement": {
            "Effect": "Allow", "Action": " s3:* ", "Resource": "arn:aws:s3:::b"}})}),
        {"iam-wildcard-action"},
    ),
    "power-user-policy-attached": (
        lambda run: _with(run, "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
                          {"policyArn": "arn:aws:iam::aws:policy/PowerUserAccess"}),
        {"iam-broad-managed-policy"},
    ),
    "iam-full-access-attached": (
        lambda run: _with(run, "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
                          {"policyArn": "arn:aws:iam::aws:policy/IAMFullAccess"}),
        {"iam-broad-managed-policy"},
    ),
    "any-aws-principal-among-others": (
        lambda run: _with(run, ROLE, _trust({
            "Principal": {"AWS": ["arn:aws:iam::123456789012:root", "*"]},
            "Action": "sts:AssumeRole"})),
        {"trust-any-principal"},
    ),
    "any-aws-principal-in-a-trust-policy-given-as-an-object": (
        # Pulumi takes policy documents as objects too, not only as JSON text
        lambda run: _with(run, ROLE, {"assumeRolePolicy": {"Statement": [{
            "Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}}),
        {"trust-any-principal"},
    ),
    "trust-everyone-but": (
        lambda run: _with(run, ROLE, _trust({
            "NotPrincipal": {"AWS": "arn:aws:iam::123456789012:root"},
            "Action": "sts:AssumeRole"})),
        {"trust-any-principal"},
    ),
    "web-identity-without-aud": (
        lambda run: _with(run, ROLE, _trust({
            "Principal": {"Federated": OIDC}, "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {"StringEquals": {"oidc.eks/id/X:sub": "system:serviceaccount:a:b"}},
        })),
        {"trust-federated-unscoped"},
    ),
    "web-identity-for-any-subject-in-a-list": (
        lambda run: _with(run, ROLE, _trust({
            "Principal": {"Federated": OIDC}, "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {"StringLike": {"oidc.eks/id/X:sub": ["*"], "oidc.eks/id/X:aud": "sts"}},
        })),
        {"trust-federated-unscoped"},
    ),
    "web-identity-pinned-by-a-negated-condition": (
        lambda run: _with(run, ROLE, _trust({
            "Principal": {"Federated": OIDC}, "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {"StringNotEquals": {"oidc.eks/id/X:sub": "system:serviceaccount:a:b",
                                              "oidc.eks/id/X:aud": "sts"}},
        })),
        {"trust-federated-unscoped"},
    ),
    "wildcard-allowed-after-a-deny": (
        # a Deny statement first does not end the reading of the document
        lambda run: _with(run, "aws:iam/policy:Policy", {"policy": json.dumps({"Statement": [
            {"Effect": "Deny", "Action": "s3:DeleteBucket", "Resource": "*"},
            {"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::b"}]})}),
        {"iam-wildcard-action"},
    ),
    "any-aws-principal-after-a-deny": (
        lambda run: _with(run, ROLE, {"assumeRolePolicy": json.dumps({"Statement": [
            {"Effect": "Deny", "Principal": {"AWS": "arn:aws:iam::123456789012:user/x"},
             "Action": "sts:AssumeRole"},
            {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]})}),
        {"trust-any-principal"},
    ),
    "admin-policy-attached": (
        lambda run: _with(run, "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
                          {"policyArn": "arn:aws:iam::aws:policy/AdministratorAccess"}),
        {"iam-broad-managed-policy"},
    ),
    "secret-with-aws-keys": (
        lambda run: _with(run, "kubernetes:core/v1:Secret",
                          {"stringData": {"AWS_SECRET_ACCESS_KEY": "x"}}),
        {"static-aws-key"},
    ),
    "session-key-id-in-env": (
        lambda run: _with(run, "kubernetes:core/v1:ConfigMap",
                          {"data": {"KEY": "ASIAABCDEFGHIJKLMNOP"}}),
        {"static-aws-key"},
    ),
    "aws-key-named-in-lower-case": (
        lambda run: _with(run, "kubernetes:core/v1:Secret",
                          {"stringData": {"aws_access_key_id": "x", "aws_session_token": "y"}}),
        {"static-aws-key"},
    ),
    "aws-key-in-a-container-env-list": (
        lambda run: _with(run, "kubernetes:apps/v1:Deployment", {"env": [
            {"name": "AWS_SECRET_ACCESS_KEY", "value": "x"}]}),
        {"static-aws-key"},
    ),
    "fis-role-may-terminate-instances": (
        lambda run: _edited(run, ROLE_POLICY, FIS_POLICY, "policy",
                            _statement(1, Action=["ec2:SendSpotInstanceInterruptions",
                                                  "ec2:TerminateInstances"])),
        {"fis-scope"},
    ),
    "fis-role-interrupts-any-stacks-instances": (
        lambda run: _edited(run, ROLE_POLICY, FIS_POLICY, "policy",
                            lambda doc: doc["Statement"][1].pop("Condition")),
        {"fis-scope"},
    ),
    "fis-role-interrupts-another-stacks-instances": (
        lambda run: _edited(run, ROLE_POLICY, FIS_POLICY, "policy",
                            lambda doc: doc["Statement"][1]["Condition"]["StringEquals"].update(
                                {"aws:ResourceTag/spotburst:stack": ["prod"]})),
        {"fis-scope"},
    ),
    "fis-trusted-for-any-account": (
        lambda run: _edited(run, ROLE, FIS_ROLE, "assumeRolePolicy",
                            lambda doc: doc["Statement"][0].pop("Condition")),
        {"fis-scope"},
    ),
    "fis-role-with-a-managed-policy": (
        lambda run: _with(run, "aws:iam/rolePolicyAttachment:RolePolicyAttachment", {
            "role": f"{FIS_ROLE}-id",
            "policyArn": "arn:aws:iam::aws:policy/AmazonEC2FullAccess"}),
        {"fis-scope"},
    ),
    "fis-template-stops-instances": (
        lambda run: _set_input(run, FIS_TEMPLATE, FIS_CPU, actions=[
            {**run.one(FIS_TEMPLATE, FIS_CPU).inputs["actions"][0],
             "actionId": "aws:ec2:stop-instances"}]),
        {"fis-scope"},
    ),
    "fis-template-targets-any-stack": (
        _fis_target(resourceTags=[{"key": "spotburst:node-pool", "value": "spot-cpu"}]),
        {"fis-scope"},
    ),
    "fis-template-targets-on-demand-instances": (
        _fis_target(resourceType="aws:ec2:instance"),
        {"fis-scope"},
    ),
    "fis-template-acts-with-another-role": (
        lambda run: _set_input(run, FIS_TEMPLATE, FIS_CPU,
                               roleArn="arn:aws:iam::123456789012:role/admin"),
        {"fis-scope"},
    ),
    "efs-access-point-compared-as-text": (
        lambda run: _edited(run, ROLE_POLICY, EFS_CSI_POLICY, "policy",
                            lambda doc: doc["Statement"][1].update(Condition={
                                "StringEquals": doc["Statement"][1]["Condition"]["ArnEquals"]})),
        {"iam-arn-condition"},
    ),
    "source-arn-matched-by-a-string-pattern-in-a-trust-policy": (
        lambda run: _with(run, ROLE, _trust({
            "Principal": {"Service": "sns.amazonaws.com"}, "Action": "sts:AssumeRole",
            "Condition": {"StringLike": {"aws:SourceArn": "arn:aws:sns:*:123456789012:*"}}})),
        {"iam-arn-condition"},
    ),
    "arn-typed-key-negated-as-text-with-set-and-if-exists-qualifiers": (
        lambda run: _with(run, POLICY, _policy({
            "Effect": "Allow", "Action": "ec2:RunInstances", "Resource": "*",
            "Condition": {"ForAnyValue:StringNotEqualsIfExists": {
                "ec2:InstanceProfile": "arn:aws:iam::123456789012:instance-profile/x"}}})),
        {"iam-arn-condition"},
    ),
    "principal-arn-in-a-bucket-policy": (
        lambda run: _with(run, BUCKET_POLICY, {"bucket": "other", **_policy({
            "Effect": "Deny", "Principal": "*", "Action": "s3:GetObject",
            "Resource": "arn:aws:s3:::b/*",
            "Condition": {"StringNotLike": {"aws:PrincipalArn": "arn:aws:iam::1:role/*"}}})}),
        {"iam-arn-condition"},
    ),
    "access-key-id-in-env": (
        lambda run: _with(run, "kubernetes:core/v1:ConfigMap",
                          {"data": {"KEY": "AKIAABCDEFGHIJKLMNOP"}}),
        {"static-aws-key"},
    ),
}


@pytest.mark.parametrize(("breakage", "rules"), BROKEN.values(), ids=BROKEN.keys())
def test_each_rule_catches_its_violation(
    dev_run: OfflineRun, breakage: Callable[[OfflineRun], OfflineRun], rules: set[str]
) -> None:
    assert fired(breakage(dev_run)) == rules


def test_harmless_variants_do_not_fire(dev_run: OfflineRun) -> None:
    """What the rules must not flag: Deny statements with wildcards, partial wildcards that
    are not a whole service, a federated principal pinned by sub and aud (StringEquals or a
    StringLike pattern), a role with no trust policy."""
    scoped = _with(dev_run, ROLE, _trust({
        "Principal": {"Federated": OIDC}, "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringEquals": {"x:sub": "system:serviceaccount:ray:doll", "x:aud": "sts"}},
    }))
    denied = _with(scoped, "aws:iam/policy:Policy", {"policy": json.dumps({"Statement": [
        {"Effect": "Deny", "Action": "*", "Resource": "*"},
        {"Effect": "Allow", "Action": "s3:Get*", "Resource": "arn:aws:s3:::b/*"}]})})
    # StringLike pins a subject too, as long as the pattern is not a bare wildcard
    patterned = _with(denied, ROLE, _trust({
        "Principal": {"Federated": OIDC}, "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringLike": {"x:sub": "system:serviceaccount:ray:doll-*", "x:aud": "sts"}},
    }))
    # a role declared without a trust policy: no one may assume it
    untrusted = _with(patterned, ROLE, {})
    # ARN keys under the ARN operators, qualified or not; a text key under a text operator
    arns = _with(untrusted, POLICY, _policy({
        "Effect": "Allow", "Action": "sns:Publish", "Resource": "arn:aws:sns:us-east-1:1:t",
        "Condition": {"ArnLike": {"aws:SourceArn": "arn:aws:s3:::spotburst-*"},
                      "ForAnyValue:ArnNotEqualsIfExists": {
                          "aws:PrincipalArn": "arn:aws:iam::1:root"},
                      "StringEquals": {"aws:SourceAccount": "123456789012"}}}))
    assert violations(arns) == []


# The TLS-only statement written the other ways IAM accepts: each still denies it all.
TLS_DENY_VARIANTS = {
    "any-aws-principal": {"Principal": {"AWS": "*"}},
    "any-aws-principal-as-a-list": {"Principal": {"AWS": ["*"]}},
    "every-action": {"Action": "*"},
    "actions-as-a-list-in-capitals": {"Action": ["S3:*"]},
    "condition-as-a-boolean": {"Condition": {"Bool": {"aws:SecureTransport": False}}},
    "resources-in-the-other-order-with-more": {"Resource": [
        "arn:aws:s3:::spotburst-dev-mock/*", "arn:aws:s3:::other",
        "arn:aws:s3:::spotburst-dev-mock"]},
}


@pytest.mark.parametrize("variant", TLS_DENY_VARIANTS.values(), ids=TLS_DENY_VARIANTS.keys())
def test_the_tls_deny_written_another_way_still_counts(
    dev_run: OfflineRun, variant: dict[str, Any]
) -> None:
    assert violations(_edited(dev_run, BUCKET_POLICY, "data-tls-only", "policy",
                              _statement(0, **variant))) == []


def test_egress_to_the_world_is_not_ingress(dev_run: OfflineRun) -> None:
    egress = _with(dev_run, "aws:ec2/securityGroupRule:SecurityGroupRule", {
        "type": "egress", "fromPort": 0, "toPort": 0, "cidrBlocks": ["0.0.0.0/0"],
        "ipv6CidrBlocks": ["::/0"]})
    # a source written with host bits set is read as its network
    inside = _with(egress, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
                   {"cidrIpv4": "10.0.0.1/16"})
    assert violations(inside) == []


def test_a_cluster_rule_violation_reads_as_its_message() -> None:
    violation = Violation("eks_secrets_use_kms", "", "EKS cluster eks: secrets not encrypted")
    assert str(violation) == "[eks_secrets_use_kms] EKS cluster eks: secrets not encrypted"
    assert "secrets not encrypted" in violation and "imdsv2" not in violation


def test_each_finding_names_the_resource_and_the_hole(dev_run: OfflineRun) -> None:
    """What a reader of the report is told: which resource, and what is wrong with it."""
    bucket = "aws:s3/bucket:Bucket data"
    leaky = _set_input(dev_run, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
                       "data-public-access", blockPublicAcls=False, restrictPublicBuckets=False)
    assert [str(v) for v in violations(leaky)] == [
        f"[bucket-public-access] {bucket}: public access not blocked: "
        "blockPublicAcls, restrictPublicBuckets"]
    plain = _without(dev_run, "aws:s3/bucketServerSideEncryptionConfiguration:"
                     "BucketServerSideEncryptionConfiguration")
    assert [str(v) for v in violations(plain)] == [
        f"[bucket-encryption] {bucket}: no server-side encryption"]
    open_ssh = _with(dev_run, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
                     {"cidrIpv4": "0.0.0.0/0"})
    assert [str(v) for v in violations(open_ssh)] == [
        "[world-ingress] aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule bad: "
        "ingress from 0.0.0.0/0"]


def _policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"policy": json.dumps({"Version": "2012-10-17", "Statement": list(statements)})}


POLICY = "aws:iam/policy:Policy"
# A breakage -> the exact findings reported (rule, resource, what is wrong).
MESSAGES: dict[str, tuple[Callable[[OfflineRun], OfflineRun], list[str]]] = {
    "no-tls-deny": (lambda run: _without(run, BUCKET_POLICY), [
        "[bucket-tls-only] aws:s3/bucket:Bucket data: no bucket policy denies access without TLS"]),
    "efs": (lambda run: _with(run, "aws:efs/fileSystem:FileSystem", {"encrypted": False}), [
        "[efs-encryption] aws:efs/fileSystem:FileSystem bad: not encrypted"]),
    "instance-imdsv1": (lambda run: _with(run, "aws:ec2/instance:Instance", {}), [
        "[imdsv2] aws:ec2/instance:Instance bad: IMDSv2 not required"]),
    "node-group-imdsv1": (
        lambda run: _with(run, "eks:index:ManagedNodeGroup", {"enableIMDSv2": False}),
        ["[imdsv2] eks:index:ManagedNodeGroup bad: IMDSv2 not required"]),
    "not-action": (
        lambda run: _with(run, POLICY, _policy(
            {"Effect": "Allow", "NotAction": "iam:PassRole", "Resource": "*"})),
        [f"[iam-wildcard-action] {POLICY} bad: allows everything but NotAction"]),
    "wildcard-without-resource": (
        lambda run: _with(run, POLICY, _policy({"Effect": "Allow", "Action": ["ec2:*"]})),
        [f"[iam-wildcard-action] {POLICY} bad: allows ['ec2:*'] on ['(no resource)']"]),
    "admin-attached": (
        lambda run: _with(run, "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
                          {"policyArn": "arn:aws:iam::aws:policy/AdministratorAccess"}),
        ["[iam-broad-managed-policy] aws:iam/rolePolicyAttachment:RolePolicyAttachment bad: "
         "attaches arn:aws:iam::aws:policy/AdministratorAccess"]),
    "any-principal": (
        lambda run: _with(run, ROLE, _trust({"Principal": "*", "Action": "sts:AssumeRole"})),
        [f"[trust-any-principal] {ROLE} bad: any AWS principal may assume the role"]),
    "federated-unscoped": (
        lambda run: _with(run, ROLE, _trust({
            "Principal": {"Federated": OIDC}, "Action": "sts:AssumeRoleWithWebIdentity"})),
        [f"[trust-federated-unscoped] {ROLE} bad: federated ['{OIDC}'] not pinned by sub "
         "and aud"]),
    "key-id": (
        lambda run: _with(run, "kubernetes:core/v1:ConfigMap",
                          {"data": {"KEY": "AKIAABCDEFGHIJKLMNOP"}}),
        ["[static-aws-key] kubernetes:core/v1:ConfigMap bad.data.KEY: "
         "holds an AWS access key id"]),
    "key-name": (
        lambda run: _with(run, "kubernetes:core/v1:Secret",
                          {"stringData": {"AWS_SECRET_ACCESS_KEY": "x"}}),
        ["[static-aws-key] kubernetes:core/v1:Secret bad.stringData.AWS_SECRET_ACCESS_KEY: "
         "names an AWS key (AWS_SECRET_ACCESS_KEY)"]),
    "key-name-in-a-list": (
        lambda run: _with(run, "kubernetes:core/v1:Secret",
                          {"items": [{"aws_session_token": "x"}]}),
        ["[static-aws-key] kubernetes:core/v1:Secret bad.items[0].aws_session_token: "
         "names an AWS key (aws_session_token)"]),
    "arn-key-as-text": (
        lambda run: _with(run, POLICY, _policy({
            "Effect": "Allow", "Action": "sns:Publish", "Resource": "arn:aws:sns:us-east-1:1:t",
            "Condition": {"StringEquals": {"aws:SourceArn": "arn:aws:s3:::b"}}})),
        [f"[iam-arn-condition] {POLICY} bad: its policy compares the ARN key aws:SourceArn "
         "with StringEquals, not ArnEquals/ArnLike"]),
    "cluster-rules-by-their-function-name": (
        # the cluster policy's plain messages, each under the name of the rule that gave it
        lambda run: _with(run, "eks:index:Cluster", {"endpointPublicAccess": False}),
        ["[ray_namespaces_have_network_policy] EKS bad: network policies are not enforced "
         "(VPC CNI)",
         "[eks_secrets_use_kms] EKS bad: secrets not encrypted with a stack KMS key"]),
}


@pytest.mark.parametrize(("breakage", "expected"), MESSAGES.values(), ids=MESSAGES.keys())
def test_each_rule_reports_the_resource_and_the_hole(
    dev_run: OfflineRun, breakage: Callable[[OfflineRun], OfflineRun], expected: list[str]
) -> None:
    assert [str(v) for v in violations(breakage(dev_run))] == expected


def test_a_cluster_rule_finding_has_no_resource_of_its_own(dev_run: OfflineRun) -> None:
    # the message names the resource; the Violation's resource is the empty string, a str
    found = violations(_with(dev_run, "eks:index:Cluster", {"endpointPublicAccess": False}))
    assert found[-1] == Violation(
        "eks_secrets_use_kms", "", "EKS bad: secrets not encrypted with a stack KMS key")


def test_a_violation_names_its_rule_and_resource(dev_run: OfflineRun) -> None:
    broken = _with(dev_run, ROLE_POLICY, _wildcard_policy("s3:*", "arn:aws:s3:::b"))
    [violation] = violations(broken)
    assert violation.rule == "iam-wildcard-action"
    assert str(violation) == (
        "[iam-wildcard-action] aws:iam/rolePolicy:RolePolicy bad: "
        "allows ['s3:*'] on ['arn:aws:s3:::b']"
    )


def test_a_world_admin_cidr_is_refused_by_config_naming_the_key() -> None:
    for world in ("0.0.0.0/0", "::/0"):
        with pytest.raises(ConfigError) as error:
            cached_run({"spotburst:adminCidrs": json.dumps([world])})
        message = str(error.value)
        assert message.startswith(f"spotburst:adminCidrs: {world} opens")
        assert "spotburst:allowWorldAdminAccess: true" in message


@pytest.mark.parametrize("cidrs", [["0.0.0.0/1", "128.0.0.0/1"], ["0.0.0.0/1"], ["8.0.0.0/7"],
                                   ["198.51.100.7/32", "2000::/3"]])
def test_an_admin_cidr_wider_than_a_public_slash_8_is_refused(cidrs: list[str]) -> None:
    with pytest.raises(ConfigError) as error:
        cached_run({"spotburst:adminCidrs": json.dumps(cidrs)})
    wide = cidrs[-1] if cidrs[0] == "198.51.100.7/32" else cidrs[0]
    assert str(error.value) == (
        f"spotburst:adminCidrs: {wide} opens the EKS API and SSH to more of the internet than a "
        "/8 of public addresses; list your own address (e.g. 203.0.113.7/32), or set "
        "spotburst:allowWorldAdminAccess: true if you really mean it")


def test_a_public_slash_8_or_one_that_is_mostly_private_is_not_the_world() -> None:
    # 10.0.0.0/7 = the private 10/8 and the public 11/8: a /8 of public addresses
    run = cached_run({"spotburst:adminCidrs": '["8.0.0.0/8", "10.0.0.0/7", "2001:db8::/32"]'})
    assert violations(run) == []


def test_halves_of_the_internet_only_with_the_loud_opt_in_and_the_policy_agrees() -> None:
    halves = ["0.0.0.0/1", "128.0.0.0/1"]
    opened = cached_run(
        {"spotburst:adminCidrs": json.dumps(halves), "spotburst:allowWorldAdminAccess": "true"}
    )
    assert opened.one("eks:index:Cluster").inputs["publicAccessCidrs"] == halves
    assert violations(opened) == []
    unopened = dataclasses.replace(
        opened, config=dataclasses.replace(opened.config, allow_world_admin_access=False))
    found = {(v.resource.split()[0], v.detail) for v in violations(unopened)}
    assert ("eks:index:Cluster", "ingress from 0.0.0.0/1") in found
    assert ("eks:index:Cluster", "ingress from 128.0.0.0/1") in found
    assert {v.rule for v in violations(unopened)} == {"world-ingress"}


def test_the_opt_in_must_be_a_boolean() -> None:
    with pytest.raises(ConfigError, match="spotburst:allowWorldAdminAccess: 'yes'"):
        cached_run({"spotburst:allowWorldAdminAccess": "yes"})


def test_world_admin_access_only_with_the_loud_opt_in() -> None:
    opened = cached_run(
        {"spotburst:adminCidrs": '["0.0.0.0/0"]', "spotburst:allowWorldAdminAccess": "true"}
    )
    assert opened.config.allow_world_admin_access is True
    assert opened.one("eks:index:Cluster").inputs["publicAccessCidrs"] == ["0.0.0.0/0"]
    assert violations(opened) == []
    # the same resources without the opt-in: the policy does not exempt adminCidrs
    config = dataclasses.replace(opened.config, allow_world_admin_access=False)
    unopened = dataclasses.replace(opened, config=config)
    found = violations(unopened)
    assert {v.rule for v in found} == {"world-ingress"}
    assert {v.resource.split()[0] for v in found} == {
        "eks:index:Cluster", "aws:ec2/securityGroup:SecurityGroup"}
