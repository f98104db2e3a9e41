"""What a DOLL user relies on: spot workers, an on-demand head, a matching Ray image, IRSA."""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from typing import Any

from launch.offline import DeclaredResource, OfflineRun

NODE_GROUP = "eks:index:ManagedNodeGroup"
RAYCLUSTER = "kubernetes:ray.io/v1:RayCluster"


def _raycluster(run: OfflineRun) -> dict[str, Any]:
    spec: dict[str, Any] = run.one(RAYCLUSTER).inputs["spec"]
    return spec


def _pod(group: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = group["template"]["spec"]
    return pod


def test_workers_run_on_spot_capacity_over_several_instance_types(dev_run: OfflineRun) -> None:
    workers = dev_run.one(NODE_GROUP, "ray-workers").inputs
    config = dev_run.config.doll.worker_nodes
    assert workers["capacityType"] == "SPOT"
    assert workers["instanceTypes"] == list(config.instance_types)
    assert len(workers["instanceTypes"]) >= 2
    assert workers["scalingConfig"] == {
        "minSize": config.min_size,
        "desiredSize": config.desired_size,
        "maxSize": config.max_size,
    }
    assert workers["taints"] == [
        {"key": "spotburst.io/spot", "value": "true", "effect": "NO_SCHEDULE"}
    ]


def test_head_group_is_on_demand(dev_run: OfflineRun) -> None:
    head = dev_run.one(NODE_GROUP, "ray-head").inputs
    assert head["capacityType"] == "ON_DEMAND"
    assert head["instanceTypes"] == list(dev_run.config.doll.head_nodes.instance_types)
    assert "taints" not in head


def test_kuberay_operator_chart_is_pinned(dev_run: OfflineRun) -> None:
    release = dev_run.one("kubernetes:helm.sh/v3:Release").inputs
    assert release["chart"] == "kuberay-operator"
    assert release["repositoryOpts"]["repo"] == "https://ray-project.github.io/kuberay-helm/"
    assert release["version"] == dev_run.config.doll.kuberay_version


def test_raycluster_image_matches_the_installed_ray(dev_run: OfflineRun) -> None:
    spec = _raycluster(dev_run)
    expected = f"rayproject/ray:{version('ray')}-py{sys.version_info.major}{sys.version_info.minor}"
    assert spec["rayVersion"] == version("ray")
    pods = [_pod(spec["headGroupSpec"])] + [_pod(g) for g in spec["workerGroupSpecs"]]
    assert {container["image"] for pod in pods for container in pod["containers"]} == {expected}


def test_raycluster_depends_on_the_operator(dev_run: OfflineRun) -> None:
    operator = dev_run.one("kubernetes:helm.sh/v3:Release")
    assert operator.urn in dev_run.one(RAYCLUSTER).dependencies


def test_head_pod_runs_on_on_demand_nodes_with_dashboard_port(dev_run: OfflineRun) -> None:
    head_group = _raycluster(dev_run)["headGroupSpec"]
    head_pod = _pod(head_group)
    head_nodes = dev_run.one(NODE_GROUP, "ray-head").inputs
    assert head_pod["nodeSelector"] == head_nodes["labels"]
    assert "tolerations" not in head_pod
    assert 8265 in [port["containerPort"] for port in head_pod["containers"][0]["ports"]]
    assert head_group["serviceType"] == "ClusterIP"
    assert head_group["rayStartParams"]


def test_workers_select_spot_nodes_and_tolerate_their_taint(dev_run: OfflineRun) -> None:
    worker_nodes = dev_run.one(NODE_GROUP, "ray-workers").inputs
    for group in _raycluster(dev_run)["workerGroupSpecs"]:
        pod = _pod(group)
        assert pod["nodeSelector"] == worker_nodes["labels"]
        for taint in worker_nodes["taints"]:
            assert {
                "key": taint["key"],
                "operator": "Equal",
                "value": taint["value"],
                "effect": "NoSchedule",
            } in pod["tolerations"]
        assert "rayStartParams" in group


def test_pod_resources_follow_config(dev_run: OfflineRun) -> None:
    spec = _raycluster(dev_run)
    doll = dev_run.config.doll
    head = _pod(spec["headGroupSpec"])["containers"][0]["resources"]["requests"]
    worker_group = spec["workerGroupSpecs"][0]
    worker = _pod(worker_group)["containers"][0]["resources"]["requests"]
    assert head == {"cpu": doll.ray_head.cpu, "memory": doll.ray_head.memory}
    assert worker == {
        "cpu": doll.ray_workers.resources.cpu,
        "memory": doll.ray_workers.resources.memory,
    }
    assert (worker_group["minReplicas"], worker_group["replicas"], worker_group["maxReplicas"]) == (
        doll.ray_workers.min_replicas,
        doll.ray_workers.replicas,
        doll.ray_workers.max_replicas,
    )


def _irsa_role(run: OfflineRun) -> DeclaredResource:
    return run.one("aws:iam/role:Role", "ray-pods")


def test_irsa_trust_is_scoped_to_the_ray_service_account(dev_run: OfflineRun) -> None:
    trust = json.loads(_irsa_role(dev_run).inputs["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    cluster = dev_run.one("eks:index:Cluster")
    issuer = f"oidc.eks.{dev_run.config.region}.amazonaws.com/id/{cluster.name.upper()}"
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Principal"] == {
        "Federated": f"arn:aws:iam::123456789012:oidc-provider/{issuer}"
    }
    assert statement["Condition"]["StringEquals"] == {
        f"{issuer}:sub": f"system:serviceaccount:{dev_run.config.doll.namespace}:ray-pods",
        f"{issuer}:aud": "sts.amazonaws.com",
    }


def test_ray_pods_use_the_irsa_service_account(dev_run: OfflineRun) -> None:
    account = dev_run.one("kubernetes:core/v1:ServiceAccount").inputs["metadata"]
    role_arn = f"arn:aws:iam:{dev_run.config.region}:123456789012:{_irsa_role(dev_run).name}"
    assert account["annotations"] == {"eks.amazonaws.com/role-arn": role_arn}
    assert account["namespace"] == dev_run.config.doll.namespace
    spec = _raycluster(dev_run)
    pods = [_pod(spec["headGroupSpec"])] + [_pod(g) for g in spec["workerGroupSpecs"]]
    assert {pod["serviceAccountName"] for pod in pods} == {account["name"]}


def test_irsa_policy_reaches_only_the_stack_bucket(dev_run: OfflineRun) -> None:
    policy = json.loads(
        dev_run.one("aws:iam/rolePolicy:RolePolicy", "ray-pods-bucket").inputs["policy"]
    )
    bucket_arn = f"arn:aws:s3:::{dev_run.outputs['bucketName']}"
    resources = {statement["Resource"] for statement in policy["Statement"]}
    assert resources == {bucket_arn, f"{bucket_arn}/*"}


def test_outputs_for_the_run_tasks(dev_run: OfflineRun) -> None:
    expected = {
        "region": dev_run.config.region,
        "dollClusterName": "spotburst-dev-doll",
        "dollNamespace": dev_run.config.doll.namespace,
        "dollRayClusterName": "doll",
        "dollHeadService": "doll-head-svc",
    }
    assert {key: dev_run.outputs[key] for key in expected} == expected
    assert dev_run.outputs["bucketName"].startswith("spotburst-dev-")
    assert json.loads(dev_run.outputs["dollKubeconfig"])["kind"] == "Config"
    assert "dollKubeconfig" in dev_run.secret_outputs
