"""Security rules every declared resource of every stack must satisfy.

Each rule walks all resources of an offline run and returns human-readable violations.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from launch.offline import DeclaredResource, OfflineRun
from tests.infra import cluster_policy

OPEN_TO_WORLD = ("0.0.0.0/0", "::/0")
AWS_ACCESS_KEY_ID = re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")
AWS_KEY_NAMES = re.compile(r"aws_(secret_)?access_key(_id)?|aws_session_token", re.IGNORECASE)


def _ingress_sources(resource: DeclaredResource) -> Iterator[str]:
    inputs = resource.inputs
    if resource.type == "aws:ec2/securityGroup:SecurityGroup":
        for rule in inputs.get("ingress") or []:
            yield from rule.get("cidrBlocks") or []
            yield from rule.get("ipv6CidrBlocks") or []
    elif (
        resource.type == "aws:ec2/securityGroupRule:SecurityGroupRule"
        and inputs.get("type") == "ingress"
    ):
        yield from inputs.get("cidrBlocks") or []
        yield from inputs.get("ipv6CidrBlocks") or []
    elif resource.type == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
        yield from [inputs[key] for key in ("cidrIpv4", "cidrIpv6") if inputs.get(key)]
    elif resource.type == "eks:index:Cluster" and inputs.get("endpointPublicAccess", True):
        # An EKS public endpoint with no CIDRs given is open to the world.
        yield from inputs.get("publicAccessCidrs") or list(OPEN_TO_WORLD)


def no_ingress_from_the_world(run: OfflineRun) -> list[str]:
    allowed = set(run.config.admin_cidrs)
    return [
        f"{resource.type} {resource.name}: ingress from {source} (not in adminCidrs)"
        for resource in run.resources
        for source in _ingress_sources(resource)
        if str(ipaddress.ip_network(source)) in OPEN_TO_WORLD and source not in allowed
    ]


def buckets_are_private_and_encrypted(run: OfflineRun) -> list[str]:
    def settings_of(resource_type: str) -> dict[str, dict[str, Any]]:
        return {r.inputs["bucket"]: r.inputs for r in run.of_type(resource_type)}

    public_access = settings_of("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    encryption = settings_of(
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    )
    flags = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    violations = []
    for bucket in run.of_type("aws:s3/bucket:Bucket"):
        bucket_id = bucket.resource_id
        block = public_access.get(bucket_id, {})
        if not all(block.get(flag) is True for flag in flags):
            violations.append(f"bucket {bucket.name}: public access not fully blocked")
        if bucket_id not in encryption:
            violations.append(f"bucket {bucket.name}: no server-side encryption")
    return violations


def file_systems_are_encrypted(run: OfflineRun) -> list[str]:
    return [
        f"EFS {fs.name}: not encrypted"
        for fs in run.of_type("aws:efs/fileSystem:FileSystem")
        if fs.inputs.get("encrypted") is not True
    ]


def imds_v2_is_required(run: OfflineRun) -> list[str]:
    violations = []
    for resource in run.resources:
        if resource.type in ("aws:ec2/instance:Instance", "aws:ec2/launchTemplate:LaunchTemplate"):
            tokens = (resource.inputs.get("metadataOptions") or {}).get("httpTokens")
            if tokens != "required":
                violations.append(f"{resource.type} {resource.name}: IMDSv2 not required")
        elif (
            resource.type == "eks:index:ManagedNodeGroup"
            and resource.inputs.get("enableIMDSv2") is not True
        ):
            violations.append(f"node group {resource.name}: IMDSv2 not required")
    return violations


def _policy_documents(resource: DeclaredResource) -> Iterator[dict[str, Any]]:
    if resource.type in ("aws:iam/rolePolicy:RolePolicy", "aws:iam/policy:Policy"):
        yield json.loads(resource.inputs["policy"])
    elif resource.type == "aws:iam/role:Role":
        for inline in resource.inputs.get("inlinePolicies") or []:
            yield json.loads(inline["policy"])


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def iam_grants_no_wildcards(run: OfflineRun) -> list[str]:
    violations = []
    for resource in run.resources:
        for document in _policy_documents(resource):
            for statement in _as_list(document.get("Statement", [])):
                if statement.get("Effect") != "Allow" or "*" not in _as_list(
                    statement.get("Resource")
                ):
                    continue
                wild = [
                    a for a in _as_list(statement.get("Action")) if a == "*" or a.endswith(":*")
                ]
                if wild:
                    violations.append(f"{resource.type} {resource.name}: allows {wild} on *")
        if resource.type == "aws:iam/rolePolicyAttachment:RolePolicyAttachment":
            if resource.inputs["policyArn"].endswith(("/AdministratorAccess", "/PowerUserAccess")):
                violations.append(f"{resource.name}: attaches {resource.inputs['policyArn']}")
    return violations


def _walk(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]")
    else:
        yield path, value


def no_static_aws_keys(run: OfflineRun) -> list[str]:
    violations = []
    for resource in run.resources:
        for path, value in _walk(resource.inputs, resource.name):
            leaf = path.rsplit(".", 1)[-1]
            if isinstance(value, str) and AWS_ACCESS_KEY_ID.search(value):
                violations.append(f"{resource.type} {path}: holds an AWS access key id")
            elif AWS_KEY_NAMES.fullmatch(leaf) or (
                isinstance(value, str) and AWS_KEY_NAMES.fullmatch(value)
            ):
                violations.append(f"{resource.type} {path}: names an AWS key ({leaf or value})")
    return violations


RULES: list[Callable[[OfflineRun], list[str]]] = [
    no_ingress_from_the_world,
    buckets_are_private_and_encrypted,
    file_systems_are_encrypted,
    imds_v2_is_required,
    iam_grants_no_wildcards,
    no_static_aws_keys,
    *cluster_policy.RULES,
]


def violations(run: OfflineRun) -> list[str]:
    return [violation for rule in RULES for violation in rule(run)]
