"""Security rules for the spot cluster and the burst token, on top of `security_policy`.

Each rule walks an offline run's declared resources and returns human-readable violations:
token auth on every RayCluster, hardened Ray pods, a network policy around every Ray
namespace (and enforcement on in the VPC CNI), EKS secrets under a rotating KMS key, the burst
token a SecureString only the burst nodes' role can decrypt, and autoscaling writes limited
to this cluster's node groups.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from fnmatch import fnmatchcase
from typing import Any

from launch.offline import MOCK_ACCOUNT, DeclaredResource, OfflineRun

RAYCLUSTER = "kubernetes:ray.io/v1:RayCluster"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
EKS_CLUSTER = "eks:index:Cluster"
KMS_KEY = "aws:kms/key:Key"
SSM_PARAMETER = "aws:ssm/parameter:Parameter"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ASG_WRITES = ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup")
PARAMETER_READS = ("ssm:GetParameter", "ssm:GetParameters")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _pod_specs(raycluster: DeclaredResource) -> Iterator[tuple[str, dict[str, Any]]]:
    spec = raycluster.inputs["spec"]
    yield f"{raycluster.name} head", spec["headGroupSpec"]["template"]["spec"]
    for group in spec.get("workerGroupSpecs") or []:
        yield f"{raycluster.name} {group.get('groupName')}", group["template"]["spec"]


def rayclusters_use_token_auth(run: OfflineRun) -> list[str]:
    return [
        f"RayCluster {rc.name}: authOptions.mode is not token"
        for rc in run.of_type(RAYCLUSTER)
        if (rc.inputs["spec"].get("authOptions") or {}).get("mode") != "token"
    ]


def _container_violations(
    where: str, context: dict[str, Any], pod_ctx: dict[str, Any]
) -> list[str]:
    found = []
    if context.get("allowPrivilegeEscalation") is not False:
        found.append(f"{where}: allowPrivilegeEscalation is not false")
    if context.get("privileged"):
        found.append(f"{where}: privileged")
    if "ALL" not in ((context.get("capabilities") or {}).get("drop") or []):
        found.append(f"{where}: capabilities not dropped (drop: [ALL])")
    if (context.get("capabilities") or {}).get("add"):
        found.append(f"{where}: adds capabilities")
    if context.get("runAsNonRoot") is False or not (
        context.get("runAsNonRoot") or pod_ctx.get("runAsNonRoot")
    ):
        found.append(f"{where}: runAsNonRoot not set")
    seccomp = (context.get("seccompProfile") or pod_ctx.get("seccompProfile") or {}).get("type")
    if seccomp != "RuntimeDefault":
        found.append(f"{where}: seccomp profile is {seccomp!r}, not RuntimeDefault")
    return found


def ray_pods_are_hardened(run: OfflineRun) -> list[str]:
    found = []
    for rc in run.of_type(RAYCLUSTER):
        for where, pod in _pod_specs(rc):
            pod_ctx = pod.get("securityContext") or {}
            if pod_ctx.get("runAsNonRoot") is not True:
                found.append(f"{where}: pod securityContext.runAsNonRoot is not true")
            if pod.get("automountServiceAccountToken") is not False:
                found.append(f"{where}: mounts the Kubernetes API token into every container")
            if pod.get("hostNetwork") or pod.get("hostPID") or pod.get("hostIPC"):
                found.append(f"{where}: shares a host namespace")
            for container in [*pod.get("initContainers", []), *pod["containers"]]:
                found += _container_violations(
                    f"{where}/{container.get('name')}",
                    container.get("securityContext") or {},
                    pod_ctx,
                )
        spec = rc.inputs["spec"]
        if spec.get("enableInTreeAutoscaling"):
            context = (spec.get("autoscalerOptions") or {}).get("securityContext") or {}
            head_ctx = spec["headGroupSpec"]["template"]["spec"].get("securityContext") or {}
            found += _container_violations(f"{rc.name} autoscaler", context, head_ctx)
    return found


def _env_secrets(where: str, container: dict[str, Any]) -> list[str]:
    found = [f"{where}: env {entry.get('name')} comes from Secret "
             f"{entry['valueFrom']['secretKeyRef'].get('name')}"
             for entry in container.get("env") or []
             if "secretKeyRef" in (entry.get("valueFrom") or {})]
    found += [f"{where}: envFrom takes all of Secret {source['secretRef'].get('name')}"
              for source in container.get("envFrom") or [] if "secretRef" in source]
    return found


def containers_take_no_secret_from_env(run: OfflineRun) -> list[str]:
    """A secret in a container's environment shows in /proc/*/environ, crash reports and
    `kubectl describe` (checkov CKV_K8S_35): every container we declare mounts it as a file."""
    found = []
    for rc in run.of_type(RAYCLUSTER):
        for where, pod in _pod_specs(rc):
            for container in [*pod.get("initContainers", []), *pod["containers"]]:
                found += _env_secrets(f"{where}/{container.get('name')}", container)
        autoscaler = rc.inputs["spec"].get("autoscalerOptions") or {}
        found += _env_secrets(f"{rc.name} autoscaler", autoscaler)
    return found


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    match = (selector or {}).get("matchLabels") or {}
    return not (selector or {}).get("matchExpressions") and all(
        labels.get(key) == value for key, value in match.items()
    )


def ray_namespaces_have_network_policy(run: OfflineRun) -> list[str]:
    found = []
    policies = run.of_type(NETWORK_POLICY)
    for rc in run.of_type(RAYCLUSTER):
        namespace = rc.inputs["metadata"]["namespace"]
        pod_labels = {"ray.io/cluster": rc.inputs["metadata"]["name"]}
        guarding = [
            policy
            for policy in policies
            if policy.inputs["metadata"].get("namespace") == namespace
            and "Ingress" in (policy.inputs["spec"].get("policyTypes") or [])
            and _selects(policy.inputs["spec"].get("podSelector") or {}, pod_labels)
        ]
        if not guarding:
            found.append(f"RayCluster {rc.name}: no ingress NetworkPolicy in namespace {namespace}")
        for policy in guarding:
            for rule in policy.inputs["spec"].get("ingress") or []:
                peers = rule.get("from") or []
                if not peers or any(not peer for peer in peers):
                    found.append(f"NetworkPolicy {policy.name}: a rule admits any source")
                if any("ipBlock" in peer for peer in peers):
                    found.append(f"NetworkPolicy {policy.name}: admits an IP block")
    if run.of_type(RAYCLUSTER):
        for cluster in run.of_type(EKS_CLUSTER):
            options = cluster.inputs.get("vpcCniOptions") or {}
            if options.get("enableNetworkPolicy") is not True:
                found.append(f"EKS {cluster.name}: network policies are not enforced (VPC CNI)")
    return found


def _key_for(run: OfflineRun, key_arn: Any) -> DeclaredResource | None:
    """The declared KMS key an ARN (as the mocks give it) points at."""
    if not isinstance(key_arn, str):
        return None
    keys = [key for key in run.of_type(KMS_KEY) if key_arn.endswith(f":{key.name}")]
    return keys[0] if len(keys) == 1 else None


def eks_secrets_use_kms(run: OfflineRun) -> list[str]:
    found = []
    for cluster in run.of_type(EKS_CLUSTER):
        key = _key_for(run, cluster.inputs.get("encryptionConfigKeyArn"))
        if key is None:
            found.append(f"EKS {cluster.name}: secrets not encrypted with a stack KMS key")
        elif key.inputs.get("enableKeyRotation") is not True:
            found.append(f"EKS {cluster.name}: KMS key {key.name} has no rotation")
    return found


def _statements(run: OfflineRun) -> Iterator[tuple[DeclaredResource, dict[str, Any]]]:
    for resource in run.of_type(ROLE_POLICY):
        document = json.loads(resource.inputs["policy"])
        for statement in _as_list(document.get("Statement", [])):
            if statement.get("Effect") == "Allow":
                yield resource, statement


def _allows(statement: dict[str, Any], action: str) -> bool:
    return any(fnmatchcase(action, pattern) for pattern in _as_list(statement.get("Action", [])))


def _covers(statement: dict[str, Any], arn: str) -> bool:
    return any(fnmatchcase(arn, pattern) for pattern in _as_list(statement.get("Resource", [])))


def _burst_node_role_ids(run: OfflineRun) -> set[str]:
    """Roles behind the instance profiles the burst EC2 nodes run with."""
    profiles = {
        i.inputs.get("iamInstanceProfile") for i in run.of_type("aws:ec2/instance:Instance")
    }
    role_names = {
        p.inputs.get("role")
        for p in run.of_type("aws:iam/instanceProfile:InstanceProfile")
        if p.name in profiles
    }
    return {r.resource_id for r in run.of_type("aws:iam/role:Role") if r.name in role_names}


def burst_token_is_readable_by_burst_nodes_only(run: OfflineRun) -> list[str]:
    found = []
    readers = _burst_node_role_ids(run)
    for parameter in run.of_type(SSM_PARAMETER):
        where = f"SSM parameter {parameter.inputs.get('name', parameter.name)}"
        if parameter.inputs.get("type") != "SecureString":
            found.append(f"{where}: not a SecureString")
        key = _key_for(run, parameter.inputs.get("keyId"))
        if key is None:
            # The default aws/ssm key decrypts for anyone allowed ssm:GetParameter (the EKS
            # nodes' SSM policy allows it on every parameter).
            found.append(f"{where}: not encrypted with a key of its own")
            continue
        if key.inputs.get("enableKeyRotation") is not True:
            found.append(f"{where}: key {key.name} has no rotation")
        if key.inputs.get("policy"):
            found.append(f"{where}: key {key.name} has a custom key policy (review its grants)")
        # ARNs as the mocks give them (see launch.offline).
        param_arn = f"arn:aws:ssm:{run.config.region}:{MOCK_ACCOUNT}:{parameter.name}"
        key_arn = f"arn:aws:kms:{run.config.region}:{MOCK_ACCOUNT}:{key.name}"
        for policy, statement in _statements(run):
            if policy.inputs.get("role") in readers:
                continue
            if any(_allows(statement, read) for read in PARAMETER_READS) and _covers(
                statement, param_arn
            ):
                found.append(f"{where}: {policy.name} lets another role read it")
            if _allows(statement, "kms:Decrypt") and _covers(statement, key_arn):
                found.append(f"{where}: {policy.name} lets another role decrypt it")
        if not readers:
            found.append(f"{where}: no burst node role reads it")
    return found


def autoscaling_is_scoped_to_this_cluster(run: OfflineRun) -> list[str]:
    found = []
    clusters = [c.inputs.get("name", c.name) for c in run.of_type(EKS_CLUSTER)]
    owned = [{f"aws:ResourceTag/k8s.io/cluster-autoscaler/{name}": "owned"} for name in clusters]
    for policy, statement in _statements(run):
        if any(_allows(statement, action) for action in ASG_WRITES):
            condition = (statement.get("Condition") or {}).get("StringEquals") or {}
            if not clusters or condition not in owned:
                found.append(f"{policy.name}: resizes Auto Scaling groups of any cluster")
        if _allows(statement, "eks:DescribeNodegroup"):
            resources = _as_list(statement.get("Resource", []))
            if not all(any(f"nodegroup/{name}/" in arn for name in clusters) for arn in resources):
                found.append(f"{policy.name}: reads node groups of other clusters")
    return found


RULES: list[Callable[[OfflineRun], list[str]]] = [
    rayclusters_use_token_auth,
    ray_pods_are_hardened,
    containers_take_no_secret_from_env,
    ray_namespaces_have_network_policy,
    eks_secrets_use_kms,
    burst_token_is_readable_by_burst_nodes_only,
    autoscaling_is_scoped_to_this_cluster,
]


def violations(run: OfflineRun) -> list[str]:
    return [violation for rule in RULES for violation in rule(run)]
