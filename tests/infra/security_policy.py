"""Security rules every declared resource of every stack must satisfy.

Each rule has an id and walks all resources of an offline run; it returns one Violation per
finding, so a test can assert WHICH rule fired, not only that something did.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from launch.offline import DeclaredResource, OfflineRun
from stacks.fields import world_wide
from tests.infra import cluster_policy

OPEN_TO_WORLD = ("0.0.0.0/0", "::/0")
AWS_ACCESS_KEY_ID = re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")
AWS_KEY_NAMES = re.compile(r"aws_(secret_)?access_key(_id)?|aws_session_token", re.IGNORECASE)
BROAD_MANAGED_POLICIES = ("/AdministratorAccess", "/PowerUserAccess", "/IAMFullAccess")
ROLE = "aws:iam/role:Role"
BUCKET = "aws:s3/bucket:Bucket"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"


@dataclass(frozen=True)
class Violation:
    rule: str
    resource: str
    detail: str

    def __str__(self) -> str:
        where = f"{self.resource}: " if self.resource else ""
        return f"[{self.rule}] {where}{self.detail}"

    def __contains__(self, text: str) -> bool:
        return text in str(self)


def _label(resource: DeclaredResource) -> str:
    return f"{resource.type} {resource.name}"


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _document(text: Any) -> dict[str, Any]:
    document = json.loads(text) if isinstance(text, str) else text
    return document if isinstance(document, dict) else {}


def _statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in _as_list(document.get("Statement")) if isinstance(s, dict)]


# --- network ----------------------------------------------------------------------------


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


def no_ingress_from_the_world(run: OfflineRun) -> list[Violation]:
    """No ingress from a block with more public addresses than a /8 (0.0.0.0/0 and ::/0, but
    also 0.0.0.0/1 + 128.0.0.0/1, 8.0.0.0/7, ...) reaches anything, whatever adminCidrs says,
    unless the stack set the loud opt-in (spotburst:allowWorldAdminAccess)."""
    if run.config.allow_world_admin_access:
        return []
    return [
        Violation("world-ingress", _label(resource), f"ingress from {source}")
        for resource in run.resources
        for source in _ingress_sources(resource)
        if world_wide(source)
    ]


# --- storage ----------------------------------------------------------------------------


def buckets_are_private_and_encrypted(run: OfflineRun) -> list[Violation]:
    def settings_of(resource_type: str) -> dict[str, dict[str, Any]]:
        return {r.inputs["bucket"]: r.inputs for r in run.of_type(resource_type)}

    public_access = settings_of("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    encryption = settings_of(
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    )
    flags = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    violations = []
    for bucket in run.of_type(BUCKET):
        block = public_access.get(bucket.resource_id, {})
        missing = [flag for flag in flags if block.get(flag) is not True]
        if missing:
            violations.append(Violation("bucket-public-access", _label(bucket),
                                        f"public access not blocked: {', '.join(missing)}"))
        if bucket.resource_id not in encryption:
            violations.append(Violation("bucket-encryption", _label(bucket),
                                        "no server-side encryption"))
    return violations


def _denies_insecure_transport(statement: dict[str, Any], bucket_arn: str) -> bool:
    """Deny, to everyone, every S3 action on the bucket and its objects, without TLS."""
    principal = statement.get("Principal")
    everyone = principal == "*" or (
        isinstance(principal, dict) and _as_list(principal.get("AWS")) == ["*"]
    )
    actions = {str(a).lower() for a in _as_list(statement.get("Action"))}
    condition = (statement.get("Condition") or {}).get("Bool") or {}
    return (
        statement.get("Effect") == "Deny"
        and everyone
        and bool(actions & {"s3:*", "*"})
        and {bucket_arn, f"{bucket_arn}/*"} <= set(_as_list(statement.get("Resource")))
        and str(condition.get("aws:SecureTransport")).lower() == "false"
    )


def buckets_deny_insecure_transport(run: OfflineRun) -> list[Violation]:
    policies: dict[str, list[dict[str, Any]]] = {}
    for policy in run.of_type(BUCKET_POLICY):
        policies.setdefault(policy.inputs["bucket"], []).extend(
            _statements(_document(policy.inputs["policy"]))
        )
    violations = []
    for bucket in run.of_type(BUCKET):
        arn = f"arn:aws:s3:::{bucket.resource_id}"
        statements = policies.get(bucket.resource_id, [])
        if not any(_denies_insecure_transport(s, arn) for s in statements):
            violations.append(Violation("bucket-tls-only", _label(bucket),
                                        "no bucket policy denies access without TLS"))
    return violations


def file_systems_are_encrypted(run: OfflineRun) -> list[Violation]:
    return [
        Violation("efs-encryption", _label(fs), "not encrypted")
        for fs in run.of_type("aws:efs/fileSystem:FileSystem")
        if fs.inputs.get("encrypted") is not True
    ]


# --- instances --------------------------------------------------------------------------


def imds_v2_is_required(run: OfflineRun) -> list[Violation]:
    """Instances and launch templates require IMDSv2 tokens; a managed node group either asks
    pulumi-eks for IMDSv2 (`enableIMDSv2`) or launches from a declared launch template that
    requires it."""
    templates = {
        r.resource_id: r for r in run.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    }

    def requires_tokens(resource: DeclaredResource) -> bool:
        return (resource.inputs.get("metadataOptions") or {}).get("httpTokens") == "required"

    violations = []
    for resource in run.resources:
        if resource.type in ("aws:ec2/instance:Instance", "aws:ec2/launchTemplate:LaunchTemplate"):
            if not requires_tokens(resource):
                violations.append(Violation("imdsv2", _label(resource), "IMDSv2 not required"))
        elif resource.type == "eks:index:ManagedNodeGroup":
            template = templates.get(str((resource.inputs.get("launchTemplate") or {}).get("id")))
            from_template = template is not None and requires_tokens(template)
            if resource.inputs.get("enableIMDSv2") is not True and not from_template:
                violations.append(Violation("imdsv2", _label(resource), "IMDSv2 not required"))
    return violations


# --- IAM --------------------------------------------------------------------------------


def _permission_documents(resource: DeclaredResource) -> Iterator[dict[str, Any]]:
    """Every permissions document a resource carries (not trust policies)."""
    if resource.type in ("aws:iam/rolePolicy:RolePolicy", "aws:iam/policy:Policy",
                         "aws:iam/userPolicy:UserPolicy", "aws:iam/groupPolicy:GroupPolicy",
                         BUCKET_POLICY):
        yield _document(resource.inputs["policy"])
    elif resource.type == ROLE:
        for inline in resource.inputs.get("inlinePolicies") or []:
            yield _document(inline["policy"])


def _is_wildcard_action(action: Any) -> bool:
    text = str(action).strip()
    return text == "*" or text.endswith(":*")


def iam_grants_no_wildcards(run: OfflineRun) -> list[Violation]:
    """No Allow of `*` or `service:*` (or NotAction) on any resource, in any policy."""
    violations = []
    for resource in run.resources:
        for document in _permission_documents(resource):
            for statement in _statements(document):
                if statement.get("Effect") != "Allow":
                    continue
                if "NotAction" in statement:
                    violations.append(Violation("iam-wildcard-action", _label(resource),
                                                "allows everything but NotAction"))
                wild = [a for a in _as_list(statement.get("Action")) if _is_wildcard_action(a)]
                if wild:
                    on = _as_list(statement.get("Resource")) or ["(no resource)"]
                    violations.append(Violation("iam-wildcard-action", _label(resource),
                                                f"allows {wild} on {on}"))
        if resource.type == "aws:iam/rolePolicyAttachment:RolePolicyAttachment":
            arn = str(resource.inputs.get("policyArn", ""))
            if arn.endswith(BROAD_MANAGED_POLICIES):
                violations.append(Violation("iam-broad-managed-policy", _label(resource),
                                            f"attaches {arn}"))
    return violations


def _principals(statement: dict[str, Any]) -> dict[str, list[Any]]:
    principal = statement.get("Principal")
    if principal == "*":
        return {"AWS": ["*"]}
    if not isinstance(principal, dict):
        return {}
    return {kind: _as_list(value) for kind, value in principal.items()}


def _condition_keys(statement: dict[str, Any]) -> dict[str, Any]:
    """Condition keys (lower-cased) under operators that pin a value, with their values."""
    keys: dict[str, Any] = {}
    for operator, entries in (statement.get("Condition") or {}).items():
        if operator in ("StringEquals", "StringLike") and isinstance(entries, dict):
            keys.update({key.lower(): value for key, value in entries.items()})
    return keys


def trust_policies_are_scoped(run: OfflineRun) -> list[Violation]:
    """Who may assume each role: never any AWS principal; a federated principal only for one
    subject and audience (its `sub` and `aud` pinned, `sub` not a bare wildcard)."""
    violations = []
    for role in run.of_type(ROLE):
        for statement in _statements(_document(role.inputs.get("assumeRolePolicy") or "{}")):
            if statement.get("Effect") != "Allow":
                continue
            principals = _principals(statement)
            if "*" in principals.get("AWS", []) or "NotPrincipal" in statement:
                violations.append(Violation("trust-any-principal", _label(role),
                                            "any AWS principal may assume the role"))
            if principals.get("Federated"):
                keys = _condition_keys(statement)
                sub = [v for k, v in keys.items() if k.endswith(":sub")]
                aud = [v for k, v in keys.items() if k.endswith(":aud")]
                if not sub or not aud or any(v in ("*", ["*"]) for v in sub):
                    violations.append(Violation(
                        "trust-federated-unscoped", _label(role),
                        f"federated {principals['Federated']} not pinned by sub and aud"))
    return violations


# --- secrets ----------------------------------------------------------------------------


def _walk(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]")
    else:
        yield path, value


def no_static_aws_keys(run: OfflineRun) -> list[Violation]:
    violations = []
    for resource in run.resources:
        for path, value in _walk(resource.inputs, resource.name):
            leaf = path.rsplit(".", 1)[-1]
            if isinstance(value, str) and AWS_ACCESS_KEY_ID.search(value):
                violations.append(Violation("static-aws-key", f"{resource.type} {path}",
                                            "holds an AWS access key id"))
            elif AWS_KEY_NAMES.fullmatch(leaf) or (
                isinstance(value, str) and AWS_KEY_NAMES.fullmatch(value)
            ):
                violations.append(Violation("static-aws-key", f"{resource.type} {path}",
                                            f"names an AWS key ({leaf or value})"))
    return violations


RULES: list[Callable[[OfflineRun], list[Violation]] | Callable[[OfflineRun], list[str]]] = [
    no_ingress_from_the_world,
    buckets_are_private_and_encrypted,
    buckets_deny_insecure_transport,
    file_systems_are_encrypted,
    imds_v2_is_required,
    iam_grants_no_wildcards,
    trust_policies_are_scoped,
    no_static_aws_keys,
    *cluster_policy.RULES,  # plain messages: their rule id is the function's name
]


def violations(run: OfflineRun) -> list[Violation]:
    return [
        found if isinstance(found, Violation) else Violation(rule.__name__, "", found)
        for rule in RULES
        for found in rule(run)
    ]


def fired(run: OfflineRun) -> set[str]:
    """The ids of the rules a run breaks."""
    return {violation.rule for violation in violations(run)}
