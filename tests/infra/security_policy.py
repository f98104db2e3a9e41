"""Security rules every declared resource of every stack must satisfy.

Each rule has an id and walks all resources of an offline run; it returns one Violation per
finding, so a test can assert WHICH rule fired, not only that something did.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from launch.offline import DeclaredResource, OfflineRun
from stacks.fields import RFC1918, world_wide
from tests.infra import cluster_policy
from vocab.tags import STACK_TAG_KEY

OPEN_TO_WORLD = ("0.0.0.0/0", "::/0")
AWS_ACCESS_KEY_ID = re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")
AWS_KEY_NAMES = re.compile(r"aws_(secret_)?access_key(_id)?|aws_session_token", re.IGNORECASE)
BROAD_MANAGED_POLICIES = ("/AdministratorAccess", "/PowerUserAccess", "/IAMFullAccess")
ROLE = "aws:iam/role:Role"
BUCKET = "aws:s3/bucket:Bucket"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
FIS_TEMPLATE = "aws:fis/experimentTemplate:ExperimentTemplate"
FIS_SERVICE = "fis.amazonaws.com"
FIS_INTERRUPT = "aws:ec2:send-spot-instance-interruptions"
SEND_SPOT_INTERRUPTIONS = "ec2:sendspotinstanceinterruptions"
FIS_ROLE_ACTIONS = {SEND_SPOT_INTERRUPTIONS, "ec2:describeinstances"}
"""What the role AWS FIS acts with may do: interrupt spot instances, and describe instances
(how it resolves tagged targets)."""


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


def _private(cidr: str) -> bool:
    network = ipaddress.ip_network(cidr, strict=False)
    return network.version == 4 and any(network.subnet_of(block)  # type: ignore[arg-type]
                                         for block in RFC1918)


def nfs_reaches_file_systems_from_inside_only(run: OfflineRun) -> list[Violation]:
    """The security groups of every EFS mount target admit NFS (2049/tcp) and nothing else,
    from security groups or private (RFC 1918) blocks only."""
    groups = {g.resource_id: g for g in run.of_type("aws:ec2/securityGroup:SecurityGroup")}
    guarding = {group for target in run.of_type("aws:efs/mountTarget:MountTarget")
                for group in target.inputs.get("securityGroups") or []}
    violations = []
    for group_id in sorted(guarding):
        group = groups.get(group_id)
        if group is None:
            violations.append(Violation("efs-nfs-scope", group_id,
                                        "a mount target's security group is not declared"))
            continue
        for rule in group.inputs.get("ingress") or []:
            ports = (rule.get("protocol"), rule.get("fromPort"), rule.get("toPort"))
            if ports != ("tcp", 2049, 2049):
                violations.append(Violation("efs-nfs-scope", _label(group),
                                            f"admits {ports}, not NFS only"))
            public = [c for c in rule.get("cidrBlocks") or [] if not _private(c)]
            public += list(rule.get("ipv6CidrBlocks") or [])
            if public:
                violations.append(Violation("efs-nfs-scope", _label(group),
                                            f"admits NFS from {', '.join(public)}"))
    return violations


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


ARN_VALUED_KEYS = frozenset({"ec2:instanceprofile", "ec2:parentsnapshot", "ec2:parentvolume",
                             "lambda:layer"})
"""Condition keys typed ARN by the IAM service authorization reference though their names do
not end in `Arn`; every key whose name ends in `Arn` is one."""
ARN_OPERATORS = ("ArnEquals", "ArnLike", "ArnNotEquals", "ArnNotLike")


def _iam_documents(resource: DeclaredResource) -> Iterator[tuple[str, dict[str, Any]]]:
    """(what it is, document) of every IAM document a resource carries: permissions, a
    role's trust policy, a key's policy."""
    for document in _permission_documents(resource):
        yield "policy", document
    if resource.type == ROLE and resource.inputs.get("assumeRolePolicy"):
        yield "trust policy", _document(resource.inputs["assumeRolePolicy"])
    if resource.type == "aws:kms/key:Key" and resource.inputs.get("policy"):
        yield "key policy", _document(resource.inputs["policy"])


def _is_arn_valued(key: str) -> bool:
    """A condition key whose values are ARNs (`aws:SourceArn`, `ec2:InstanceProfile`)."""
    name = key.strip().lower()
    return name.endswith("arn") or name in ARN_VALUED_KEYS


def _base_operator(operator: str) -> str:
    """`ForAnyValue:StringEqualsIfExists` -> `StringEquals`."""
    return operator.rpartition(":")[2].removesuffix("IfExists")


def arn_condition_keys_use_arn_operators(run: OfflineRun) -> list[Violation]:
    """An ARN-valued condition key is compared with ArnEquals/ArnLike (and their negations),
    in every IAM document: a String* operator compares the text, which IAM's linters flag and
    which misses an ARN's case-insensitive service and partition parts."""
    violations = []
    for resource in run.resources:
        for kind, document in _iam_documents(resource):
            for statement in _statements(document):
                condition = statement.get("Condition")
                for operator, entries in (condition if isinstance(condition, dict)
                                          else {}).items():
                    if (_base_operator(operator) in ARN_OPERATORS
                            or not isinstance(entries, dict)):
                        continue
                    for key in entries:
                        if _is_arn_valued(key):
                            violations.append(Violation(
                                "iam-arn-condition", _label(resource),
                                f"its {kind} compares the ARN key {key} with {operator}, "
                                "not ArnEquals/ArnLike"))
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


# --- fault injection (AWS FIS) -------------------------------------------------------------


def _fis_roles(run: OfflineRun) -> list[DeclaredResource]:
    return [role for role in run.of_type(ROLE)
            if any(FIS_SERVICE in _principals(s).get("Service", [])
                   for s in _statements(_document(role.inputs.get("assumeRolePolicy") or "{}"))
                   if s.get("Effect") == "Allow")]


def _pins_the_stack(statement: dict[str, Any], stack: str) -> bool:
    """The statement's condition requires the instance to carry the stack's tag."""
    values = _condition_keys(statement).get(f"aws:resourcetag/{STACK_TAG_KEY}".lower())
    return values is not None and _as_list(values) == [stack]


def fis_interrupts_this_stacks_spot_instances_only(run: OfflineRun) -> list[Violation]:
    """A role FIS may assume is trusted for this account only (aws:SourceAccount pinned),
    has no managed policy, and allows nothing but describing instances and interrupting
    spot instances that carry the stack's tag; every FIS experiment template acts with such
    a role, only interrupts spot instances, and selects them by the stack's tag."""
    violations = []
    roles = _fis_roles(run)
    for role in roles:
        label = _label(role)
        for statement in _statements(_document(role.inputs.get("assumeRolePolicy") or "{}")):
            if (statement.get("Effect") == "Allow"
                    and FIS_SERVICE in _principals(statement).get("Service", [])
                    and "aws:sourceaccount" not in _condition_keys(statement)):
                violations.append(Violation("fis-scope", label,
                                            "FIS may assume it for any account"))
        documents = [_document(p.inputs["policy"]) for p in run.of_type(ROLE_POLICY)
                     if p.inputs.get("role") == role.resource_id]
        documents += list(_permission_documents(role))
        for attachment in run.of_type(ROLE_POLICY_ATTACHMENT):
            if attachment.inputs.get("role") == role.resource_id:
                violations.append(Violation("fis-scope", label,
                                            f"has {attachment.inputs.get('policyArn')} attached"))
        for statement in (s for d in documents for s in _statements(d)):
            if statement.get("Effect") != "Allow":
                continue
            actions = {str(a).strip().lower() for a in _as_list(statement.get("Action"))}
            extra = sorted(actions - FIS_ROLE_ACTIONS) + (
                ["NotAction"] if "NotAction" in statement else [])
            if extra:
                violations.append(Violation("fis-scope", label, f"allows {extra}"))
            if SEND_SPOT_INTERRUPTIONS in actions and not _pins_the_stack(statement,
                                                                         run.config.stack):
                violations.append(Violation(
                    "fis-scope", label,
                    f"interrupts instances without the tag {STACK_TAG_KEY}={run.config.stack}"))
    for template in run.of_type(FIS_TEMPLATE):
        label = _label(template)
        arn = str(template.inputs.get("roleArn", ""))
        if not any(arn.endswith(f":{role.name}") for role in roles):
            violations.append(Violation("fis-scope", label,
                                        f"acts with {arn or 'no role'}, not a role FIS is "
                                        "scoped by"))
        for action in template.inputs.get("actions") or []:
            if action.get("actionId") != FIS_INTERRUPT:
                violations.append(Violation("fis-scope", label,
                                            f"runs {action.get('actionId')}"))
        for target in template.inputs.get("targets") or []:
            tags = {t.get("key"): t.get("value") for t in target.get("resourceTags") or []}
            if target.get("resourceType") != "aws:ec2:spot-instance":
                violations.append(Violation("fis-scope", label,
                                            f"targets {target.get('resourceType')}"))
            if tags.get(STACK_TAG_KEY) != run.config.stack:
                violations.append(Violation(
                    "fis-scope", label,
                    f"selects targets without the tag {STACK_TAG_KEY}={run.config.stack}"))
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
    nfs_reaches_file_systems_from_inside_only,
    imds_v2_is_required,
    iam_grants_no_wildcards,
    trust_policies_are_scoped,
    arn_condition_keys_use_arn_operators,
    fis_interrupts_this_stacks_spot_instances_only,
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
