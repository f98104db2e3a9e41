"""The `ray.io/v1` RayCluster spec, as plain data (validated offline against KubeRay's CRDs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vocab.ports import CLIENT_SERVER_PORT, DASHBOARD_PORT, GCS_PORT


@dataclass
class RayPodShape:
    cpu: str
    memory: str
    node_selector: dict[str, str]
    tolerations: list[dict[str, str]]


@dataclass
class RayClusterSpecArgs:
    ray_version: str
    image: str
    service_account: str
    head: RayPodShape
    worker: RayPodShape
    worker_group: str
    min_replicas: int
    replicas: int
    max_replicas: int


def head_service_name(cluster_name: str) -> str:
    """The Service KubeRay creates for the head pod (dashboard and Jobs API on 8265)."""
    return f"{cluster_name}-head-svc"


def raycluster_spec(args: RayClusterSpecArgs) -> dict[str, Any]:
    head_ports = [
        {"name": "gcs-server", "containerPort": GCS_PORT},
        {"name": "dashboard", "containerPort": DASHBOARD_PORT},
        {"name": "client", "containerPort": CLIENT_SERVER_PORT},
    ]
    return {
        "rayVersion": args.ray_version,
        "headGroupSpec": {
            # ClusterIP: the dashboard is reached through `kubectl port-forward`, never exposed.
            "serviceType": "ClusterIP",
            # The dashboard listens on the pod network so that the port-forward reaches it.
            "rayStartParams": {"dashboard-host": "0.0.0.0"},
            "template": _pod_template(args, args.head, "ray-head", head_ports),
        },
        "workerGroupSpecs": [
            {
                "groupName": args.worker_group,
                "replicas": args.replicas,
                "minReplicas": args.min_replicas,
                "maxReplicas": args.max_replicas,
                "rayStartParams": {},
                "template": _pod_template(args, args.worker, "ray-worker", []),
            }
        ],
    }


def _pod_template(
    args: RayClusterSpecArgs, shape: RayPodShape, container: str, ports: list[dict[str, Any]]
) -> dict[str, Any]:
    resources = {"cpu": shape.cpu, "memory": shape.memory}
    spec: dict[str, Any] = {
        "serviceAccountName": args.service_account,
        "nodeSelector": shape.node_selector,
        "containers": [
            {
                "name": container,
                "image": args.image,
                "resources": {"requests": resources, "limits": resources},
                "securityContext": {"allowPrivilegeEscalation": False},
            }
        ],
    }
    if ports:
        spec["containers"][0]["ports"] = ports
    if shape.tolerations:
        spec["tolerations"] = shape.tolerations
    return {"spec": spec}
