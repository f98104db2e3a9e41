"""The spot cluster and burst token rules: the dev stack (every experiment on) passes them,
and each rule goes red, naming what broke, when one thing about it is broken."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest

from launch.offline import DeclaredResource, OfflineRun
from stacks.config_types import KNOWN_EXPERIMENTS
from tests.infra import cluster_policy
from tests.infra.cluster_policy import (
    EKS_CLUSTER,
    KMS_KEY,
    NETWORK_POLICY,
    RAYCLUSTER,
    ROLE_POLICY,
    SSM_PARAMETER,
)


def test_dev_stack_with_every_experiment_passes(dev_run: OfflineRun) -> None:
    assert set(dev_run.config.experiments) == set(KNOWN_EXPERIMENTS)
    assert len(dev_run.of_type(RAYCLUSTER)) == 4
    assert cluster_policy.violations(dev_run) == []


def _edit(
    run: OfflineRun, resource_type: str, change: Callable[[dict[str, Any]], Any], name: str = ""
) -> OfflineRun:
    """The run with one resource's inputs changed (of its type, the one whose name starts so)."""
    target = [r for r in run.of_type(resource_type) if r.name.startswith(name)][0]
    inputs = copy.deepcopy(target.inputs)
    change(inputs)
    edited = dataclasses.replace(target, inputs=inputs)
    return dataclasses.replace(run, resources=[edited if r is target else r for r in run.resources])


def _without(run: OfflineRun, resource: DeclaredResource) -> OfflineRun:
    return dataclasses.replace(run, resources=[r for r in run.resources if r is not resource])


def _worker_pod(inputs: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = inputs["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    return pod


def _head_pod(inputs: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = inputs["spec"]["headGroupSpec"]["template"]["spec"]
    return pod


def _policy_on(role_id: str, statement: dict[str, Any]) -> DeclaredResource:
    document = {"Version": "2012-10-17", "Statement": [statement]}
    return DeclaredResource(
        urn="urn:test::extra",
        resource_id="extra-id",
        type=ROLE_POLICY,
        name="extra",
        parent_urn="",
        custom=True,
        inputs={"role": role_id, "policy": json.dumps(document)},
        dependencies=(),
    )


def _with_policy(run: OfflineRun, statement: dict[str, Any]) -> OfflineRun:
    eks_nodes = run.one("aws:iam/role:Role", "eks-node-role").resource_id
    return dataclasses.replace(run, resources=[*run.resources, _policy_on(eks_nodes, statement)])


def _token_parameter(run: OfflineRun) -> DeclaredResource:
    return run.one(SSM_PARAMETER)


def _autoscaler_statement(
    run: OfflineRun, change: Callable[[list[dict[str, Any]]], Any]
) -> OfflineRun:
    def edit(inputs: dict[str, Any]) -> None:
        document = json.loads(inputs["policy"])
        change(document["Statement"])
        inputs["policy"] = json.dumps(document)

    return _edit(run, ROLE_POLICY, edit, "cluster-autoscaler-irsa-node-groups")


BROKEN: dict[str, tuple[Callable[[OfflineRun], OfflineRun], str]] = {
    "raycluster-without-auth": (
        lambda run: _edit(run, RAYCLUSTER, lambda i: i["spec"].pop("authOptions")),
        "authOptions.mode is not token",
    ),
    "raycluster-auth-disabled": (
        lambda run: _edit(
            run, RAYCLUSTER, lambda i: i["spec"].update(authOptions={"mode": "disabled"}), "rl"
        ),
        "authOptions.mode is not token",
    ),
    "pod-may-run-as-root": (
        lambda run: _edit(run, RAYCLUSTER, lambda i: _worker_pod(i)["securityContext"].clear()),
        "runAsNonRoot",
    ),
    "agent-token-from-env": (
        lambda run: _edit(
            run,
            RAYCLUSTER,
            lambda i: _worker_pod(i)["containers"][-1]["env"].append(
                {"name": "RAY_AUTH_TOKEN",
                 "valueFrom": {"secretKeyRef": {"name": "doll", "key": "auth_token"}}}),
            "doll",
        ),
        "env RAY_AUTH_TOKEN comes from Secret doll",
    ),
    "head-env-from-secret": (
        lambda run: _edit(
            run,
            RAYCLUSTER,
            lambda i: _head_pod(i)["containers"][0].update(
                envFrom=[{"secretRef": {"name": "keys"}}]),
        ),
        "envFrom takes all of Secret keys",
    ),
    "container-privilege-escalation": (
        lambda run: _edit(
            run,
            RAYCLUSTER,
            lambda i: _head_pod(i)["containers"][0]["securityContext"].update(
                allowPrivilegeEscalation=True
            ),
        ),
        "allowPrivilegeEscalation is not false",
    ),
    "container-keeps-capabilities": (
        lambda run: _edit(
            run,
            RAYCLUSTER,
            lambda i: _worker_pod(i)["containers"][0]["securityContext"].pop("capabilities"),
            "elastic",
        ),
        "capabilities not dropped",
    ),
    "container-privileged": (
        lambda run: _edit(
            run,
            RAYCLUSTER,
            lambda i: _worker_pod(i)["containers"][0]["securityContext"].update(privileged=True),
        ),
        "privileged",
    ),
    "seccomp-unconfined": (
        lambda run: _edit(
            run,
            RAYCLUSTER,
            lambda i: [
                _worker_pod(i)["securityContext"].update(seccompProfile={"type": "Unconfined"}),
                _worker_pod(i)["containers"][0]["securityContext"].pop("seccompProfile"),
            ],
        ),
        "not RuntimeDefault",
    ),
    "worker-mounts-api-token": (
        lambda run: _edit(
            run, RAYCLUSTER, lambda i: _worker_pod(i).update(automountServiceAccountToken=True)
        ),
        "Kubernetes API token",
    ),
    "autoscaler-sidecar-not-hardened": (
        lambda run: _edit(
            run,
            RAYCLUSTER,
            lambda i: i["spec"]["autoscalerOptions"].pop("securityContext"),
            "rl",
        ),
        "autoscaler: allowPrivilegeEscalation",
    ),
    "namespace-without-network-policy": (
        lambda run: _without(run, run.one(NETWORK_POLICY, "inference-ingress")),
        "no ingress NetworkPolicy in namespace inference",
    ),
    "network-policy-admits-anyone": (
        lambda run: _edit(run, NETWORK_POLICY, lambda i: i["spec"]["ingress"].append({})),
        "admits any source",
    ),
    "network-policy-admits-a-cidr": (
        lambda run: _edit(
            run,
            NETWORK_POLICY,
            lambda i: i["spec"]["ingress"].append({"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}),
        ),
        "admits an IP block",
    ),
    "network-policy-for-other-pods": (
        lambda run: _edit(
            run,
            NETWORK_POLICY,
            lambda i: i["spec"].update(podSelector={"matchLabels": {"ray.io/cluster": "x"}}),
            "doll",
        ),
        "no ingress NetworkPolicy in namespace doll",
    ),
    "vpc-cni-does-not-enforce": (
        lambda run: _edit(run, EKS_CLUSTER, lambda i: i["vpcCniOptions"].clear()),
        "network policies are not enforced",
    ),
    "eks-secrets-without-kms": (
        lambda run: _edit(run, EKS_CLUSTER, lambda i: i.pop("encryptionConfigKeyArn")),
        "secrets not encrypted",
    ),
    "eks-secrets-key-without-rotation": (
        lambda run: _edit(
            run,
            KMS_KEY,
            lambda i: i.update(enableKeyRotation=False),
            "eks-secrets",
        ),
        "has no rotation",
    ),
    "token-parameter-plain-string": (
        lambda run: _edit(run, SSM_PARAMETER, lambda i: i.update(type="String")),
        "not a SecureString",
    ),
    "token-parameter-default-key": (
        lambda run: _edit(run, SSM_PARAMETER, lambda i: i.pop("keyId")),
        "not encrypted with a key of its own",
    ),
    "token-parameter-readable-by-eks-nodes": (
        lambda run: _with_policy(
            run, {"Effect": "Allow", "Action": "ssm:GetParameter*", "Resource": "*"}
        ),
        "lets another role read it",
    ),
    "token-key-decryptable-by-eks-nodes": (
        lambda run: _with_policy(
            run, {"Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": "arn:aws:kms:*"}
        ),
        "lets another role decrypt it",
    ),
    "autoscaler-resizes-any-group": (
        lambda run: _autoscaler_statement(run, lambda s: s[0].pop("Condition")),
        "resizes Auto Scaling groups of any cluster",
    ),
    "autoscaler-tag-of-another-cluster": (
        lambda run: _autoscaler_statement(
            run,
            lambda s: s[0].update(
                Condition={
                    "StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/other": "owned"}
                }
            ),
        ),
        "resizes Auto Scaling groups of any cluster",
    ),
    "autoscaler-star-action": (
        lambda run: _with_policy(
            run, {"Effect": "Allow", "Action": "autoscaling:*", "Resource": "*"}
        ),
        "resizes Auto Scaling groups of any cluster",
    ),
    "autoscaler-reads-every-node-group": (
        lambda run: _autoscaler_statement(run, lambda s: s[2].update(Resource="*")),
        "reads node groups of other clusters",
    ),
}


@pytest.mark.parametrize(("breakage", "message"), BROKEN.values(), ids=BROKEN.keys())
def test_each_rule_goes_red_naming_what_broke(
    dev_run: OfflineRun, breakage: Callable[[OfflineRun], OfflineRun], message: str
) -> None:
    broken = cluster_policy.violations(breakage(dev_run))
    assert any(message in violation for violation in broken), broken


def test_the_security_policy_runs_these_rules(dev_run: OfflineRun) -> None:
    from tests.infra import security_policy

    assert set(cluster_policy.RULES) <= set(security_policy.RULES)
    broken = _edit(dev_run, RAYCLUSTER, lambda i: i["spec"].pop("authOptions"))
    assert any("authOptions" in v for v in security_policy.violations(broken))
