"""The `ray.io/v1` RayCluster spec, as plain data (validated offline against KubeRay's CRD).

Every RayCluster has token auth (KubeRay >= 1.6 generates the token into a Secret named like
the cluster and injects it into every Ray container) and hardened pods. Spot worker groups
get a grace period and a Ray drain timeout sized to the two-minute spot warning: the node
group's drain becomes SIGTERM to `ray start --block`, which drains the node with reason
PREEMPTION (Ray Train and RLlib act on it) and exits before the node is gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components.placement import GPU_RESOURCE, PoolPlacement
from vocab.ports import CLIENT_SERVER_PORT, DASHBOARD_PORT, GCS_PORT
from vocab.spot import SPOT_WARNING_S

HEAD_PORTS = {"gcs-server": GCS_PORT, "dashboard": DASHBOARD_PORT, "client": CLIENT_SERVER_PORT}
RAY_UID = 1000
"""The `ray` user of the rayproject/ray images (group `users`, 100)."""
RAY_GID = 100
SPOT_POD_GRACE_S = int(SPOT_WARNING_S) - 10
"""The eviction starts a few seconds after the notice; the pod must be gone before the node."""
RAY_DRAIN_TIMEOUT_S = SPOT_POD_GRACE_S - 20
"""Ray drains this long, then exits inside the grace period (before the kubelet's SIGKILL)."""
DRAIN_TIMEOUT_ENV = "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"
API_TOKEN_VOLUME = "kube-api-access"
API_TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
AUTOSCALER_IDLE_TIMEOUT_S = 60
AUTOSCALER_CPU = "500m"
AUTOSCALER_MEMORY = "512Mi"
"""The Ray autoscaler's container, beside the head's in the head pod when it is on."""
REDIS_CA_PATH_ENV = "RAY_REDIS_CA_PATH"
SYSTEM_CA_PATH = "/etc/ssl/certs"
"""The image's system CAs: what the GCS checks the managed Redis's TLS certificate against."""
GCS_PASSWORD_KEY = "password"


@dataclass
class RayHeadArgs:
    cpu: str
    memory: str
    placement: PoolPlacement


@dataclass
class WorkerGroupArgs:
    name: str
    cpu: str
    memory: str
    gpu: int
    placement: PoolPlacement
    min_replicas: int
    replicas: int
    max_replicas: int
    ray_resources: dict[str, float] = field(default_factory=dict)
    """Custom Ray resources every node of the group advertises (placement)."""
    ray_labels: dict[str, str] = field(default_factory=dict)
    """Ray node labels of the group's nodes."""


@dataclass
class GcsFaultToleranceArgs:
    """The GCS keeps its state in Redis (TLS, password from a Secret in the namespace)."""

    redis_address: Any
    """`rediss://host:port` (a plain string or a Pulumi output)."""
    password_secret: str


@dataclass
class RayClusterSpecArgs:
    ray_version: str
    image: str
    service_account: str
    head: RayHeadArgs
    worker_groups: list[WorkerGroupArgs]
    ray_autoscaler: bool
    gcs_fault_tolerance: GcsFaultToleranceArgs | None = None


def head_service_name(cluster_name: str) -> str:
    """The Service KubeRay creates for the head pod (dashboard and Jobs API on 8265)."""
    return f"{cluster_name}-head-svc"


def gcs_password_secret_name(cluster_name: str) -> str:
    """The Secret (key `password`) holding the GCS Redis password of a fault-tolerant head."""
    return f"{cluster_name}-gcs-redis"


def token_secret_name(cluster_name: str) -> str:
    """The Secret (key `auth_token`) KubeRay generates for `authOptions.mode: token`."""
    return cluster_name


def raycluster_spec(args: RayClusterSpecArgs) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "rayVersion": args.ray_version,
        "authOptions": {"mode": "token"},
        "enableInTreeAutoscaling": args.ray_autoscaler,
        "headGroupSpec": {
            # ClusterIP: the dashboard is reached through `kubectl port-forward`, never exposed.
            "serviceType": "ClusterIP",
            # The dashboard listens on the pod network so that the port-forward reaches it.
            "rayStartParams": {"dashboard-host": "0.0.0.0"},
            "template": _head_template(args),
        },
        "workerGroupSpecs": [_worker_group(args, group) for group in args.worker_groups],
    }
    if args.gcs_fault_tolerance is not None:
        spec["gcsFaultToleranceOptions"] = _gcs_fault_tolerance(args.gcs_fault_tolerance)
    if args.ray_autoscaler:
        spec["autoscalerOptions"] = {
            "upscalingMode": "Default",
            "idleTimeoutSeconds": AUTOSCALER_IDLE_TIMEOUT_S,
            "resources": _limits(AUTOSCALER_CPU, AUTOSCALER_MEMORY, 0),
            "securityContext": _container_security(),
            # Only the autoscaler talks to the Kubernetes API: only it mounts the token.
            "volumeMounts": [
                {"name": API_TOKEN_VOLUME, "mountPath": API_TOKEN_PATH, "readOnly": True}
            ],
        }
    return spec


def _head_template(args: RayClusterSpecArgs) -> dict[str, Any]:
    head = args.head
    ports = [{"name": name, "containerPort": port} for name, port in HEAD_PORTS.items()]
    container = _container(args, "ray-head", head.cpu, head.memory, 0)
    container["ports"] = ports
    if args.gcs_fault_tolerance is not None:
        container["env"] = [{"name": REDIS_CA_PATH_ENV, "value": SYSTEM_CA_PATH}]
    pod = _pod(args, head.placement, container)
    if args.ray_autoscaler:
        pod["volumes"] = [_api_token_volume()]
    return {"metadata": _pod_metadata(), "spec": pod}


def _gcs_fault_tolerance(gcs: GcsFaultToleranceArgs) -> dict[str, Any]:
    """KubeRay hands the address and password to the head's GCS and gives the workers time
    to reconnect to a restarted head instead of exiting with it."""
    return {
        "redisAddress": gcs.redis_address,
        "redisPassword": {
            "valueFrom": {"secretKeyRef": {"name": gcs.password_secret, "key": GCS_PASSWORD_KEY}}
        },
    }


def _worker_group(args: RayClusterSpecArgs, group: WorkerGroupArgs) -> dict[str, Any]:
    container = _container(args, "ray-worker", group.cpu, group.memory, group.gpu)
    pod = _pod(args, group.placement, container)
    if group.placement.spot:
        pod["terminationGracePeriodSeconds"] = SPOT_POD_GRACE_S
        container["env"] = [{"name": DRAIN_TIMEOUT_ENV, "value": str(RAY_DRAIN_TIMEOUT_S)}]
    spec: dict[str, Any] = {
        "groupName": group.name,
        "replicas": group.replicas,
        "minReplicas": group.min_replicas,
        "maxReplicas": group.max_replicas,
        "rayStartParams": {},
        "template": {"metadata": _pod_metadata(), "spec": pod},
    }
    if group.ray_resources:
        spec["resources"] = {name: f"{value:g}" for name, value in group.ray_resources.items()}
    if group.ray_labels:
        spec["labels"] = dict(group.ray_labels)
    return spec


def _pod_metadata() -> dict[str, Any]:
    # The Cluster Autoscaler never evicts a Ray pod to pack nodes; idle Ray workers are
    # removed by Ray (or by their spec), then the empty node goes.
    return {"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}}


def _pod(
    args: RayClusterSpecArgs, placement: PoolPlacement, container: dict[str, Any]
) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "serviceAccountName": args.service_account,
        # Ray needs no Kubernetes API; the IRSA web identity token is mounted separately.
        "automountServiceAccountToken": False,
        "nodeSelector": placement.node_selector,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RAY_UID,
            "runAsGroup": RAY_GID,
            "fsGroup": RAY_GID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
    }
    if placement.tolerations:
        pod["tolerations"] = placement.tolerations
    return pod


def _container(
    args: RayClusterSpecArgs, name: str, cpu: str, memory: str, gpu: int
) -> dict[str, Any]:
    return {
        "name": name,
        "image": args.image,
        "resources": _limits(cpu, memory, gpu),
        "securityContext": _container_security(),
    }


def _limits(cpu: str, memory: str, gpu: int) -> dict[str, Any]:
    amounts = {"cpu": cpu, "memory": memory}
    if gpu:
        amounts[GPU_RESOURCE] = str(gpu)
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _container_security() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _api_token_volume() -> dict[str, Any]:
    """What `automountServiceAccountToken` would mount, as a volume one container can take."""
    return {
        "name": API_TOKEN_VOLUME,
        "projected": {
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {
                    "configMap": {
                        "name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                    }
                },
                {
                    "downwardAPI": {
                        "items": [
                            {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}
                        ]
                    }
                },
            ]
        },
    }
