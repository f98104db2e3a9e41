"""The `ray.io/v1` RayCluster spec, as plain data (validated offline against KubeRay's CRD).

Every RayCluster has token auth (KubeRay >= 1.6 generates the token into a Secret named like
the cluster and injects it into every Ray container) and hardened pods. Every pod of a spot
worker group runs the notice agent (workloads/common/notice_agent.py) in a second container
of the same image: it polls the node's metadata service and drains its Ray node through the
GCS at the interruption notice, with reason PREEMPTION and the notice's deadline, whenever
the node group's eviction comes. The pod's grace period, Ray's drain timeout (the node
group's eviction becomes SIGTERM to `ray start --block`, which drains too and stops) and the
agent's poll come from one timing budget (vocab/spot_budget.py). Ray's image does not hold
this project: the agent's files (vocab/spot.py's NOTICE_AGENT_FILES) come from a ConfigMap,
mounted read-only; the agent reads the cluster's token from its Secret, mounted read-only as
a file (RAY_AUTH_TOKEN_PATH). No container declared here takes a secret from an environment
variable; the Ray containers get theirs from KubeRay. With a shared claim, the Ray container
of the head and of every worker mounts the stack's shared file system read-write at
/mnt/shared (vocab/shared_data.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components.placement import GPU_RESOURCE, PoolPlacement
from vocab.ports import CLIENT_SERVER_PORT, DASHBOARD_PORT, GCS_PORT
from vocab.shared_data import SHARED_ENV, SHARED_MOUNT_PATH, SHARED_VOLUME
from vocab.spot import NOTICE_AGENT_FILES, NOTICE_AGENT_MODULE
from vocab.spot_budget import AWS_BUDGET, SpotBudget

HEAD_PORTS = {"gcs-server": GCS_PORT, "dashboard": DASHBOARD_PORT, "client": CLIENT_SERVER_PORT}
RAY_UID = 1000
"""The `ray` user of the rayproject/ray images (group `users`, 100)."""
RAY_GID = 100
DRAIN_TIMEOUT_ENV = "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"
NOTICE_AGENT_CONTAINER = "notice-agent"
NOTICE_AGENT_VOLUME = "notice-agent"
NOTICE_AGENT_ROOT = "/opt/spotburst"
"""Where a spot pod mounts the agent's files (its PYTHONPATH)."""
NOTICE_AGENT_CPU = "100m"
NOTICE_AGENT_MEMORY = "256Mi"
"""The agent's container: a poll every few seconds; Ray's GCS client is most of its memory."""
TOKEN_KEY = "auth_token"
"""The key of KubeRay's token Secret that holds the Ray token."""
TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
"""Where Ray reads its token from a file (after RAY_AUTH_TOKEN, before ~/.ray/auth_token)."""
NOTICE_AGENT_TOKEN_VOLUME = "ray-token"
NOTICE_AGENT_TOKEN_DIR = "/var/run/secrets/ray"
"""Where a spot pod's agent mounts the cluster's token Secret (read-only, the token alone)."""
TOKEN_FILE_MODE = 0o440
"""Owner root, group the pod's fsGroup (Ray's user is in it): nobody else reads it."""
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
class NoticeAgentArgs:
    """The notice agent beside Ray in every spot pod."""

    drain_on_rebalance: bool = False
    budget: SpotBudget = AWS_BUDGET


@dataclass
class RayClusterSpecArgs:
    cluster_name: str
    ray_version: str
    image: str
    service_account: str
    head: RayHeadArgs
    worker_groups: list[WorkerGroupArgs]
    ray_autoscaler: bool
    gcs_fault_tolerance: GcsFaultToleranceArgs | None = None
    notice_agent: NoticeAgentArgs = field(default_factory=NoticeAgentArgs)
    shared_claim: str | None = None
    """A ReadWriteMany PersistentVolumeClaim in the cluster's namespace: mounted read-write
    at SHARED_MOUNT_PATH in the Ray container of the head and every worker, named by
    SHARED_ENV."""


def shared_claim_name(cluster_name: str) -> str:
    """The PersistentVolumeClaim of the stack's shared file system in a cluster's namespace."""
    return f"{cluster_name}-{SHARED_VOLUME}"


def head_service_name(cluster_name: str) -> str:
    """The Service KubeRay creates for the head pod (dashboard and Jobs API on 8265)."""
    return f"{cluster_name}-head-svc"


def gcs_password_secret_name(cluster_name: str) -> str:
    """The Secret (key `password`) holding the GCS Redis password of a fault-tolerant head."""
    return f"{cluster_name}-gcs-redis"


def token_secret_name(cluster_name: str) -> str:
    """The Secret (key `auth_token`) KubeRay generates for `authOptions.mode: token`."""
    return cluster_name


def notice_agent_config_map_name(cluster_name: str) -> str:
    """The ConfigMap (in the cluster's namespace) holding the notice agent's files."""
    return f"{cluster_name}-notice-agent"


def notice_agent_file_key(path: str) -> str:
    """A project file's key in the agent's ConfigMap (keys may not hold a `/`)."""
    return path.replace("/", "__")


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
    _mount_shared(args, pod, container)
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
        budget = args.notice_agent.budget
        pod["terminationGracePeriodSeconds"] = int(budget.grace_period_s)
        container["env"] = [{"name": DRAIN_TIMEOUT_ENV, "value": f"{budget.drain_timeout_s:g}"}]
        pod["containers"].append(_notice_agent(args))
        pod["volumes"] = [_notice_agent_volume(args.cluster_name),
                          _notice_agent_token_volume(args.cluster_name)]
    _mount_shared(args, pod, container)
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


def _mount_shared(
    args: RayClusterSpecArgs, pod: dict[str, Any], container: dict[str, Any]
) -> None:
    """The shared claim in the Ray container (not beside it: the agent needs no data)."""
    if args.shared_claim is None:
        return
    pod.setdefault("volumes", []).append(
        {"name": SHARED_VOLUME, "persistentVolumeClaim": {"claimName": args.shared_claim}}
    )
    container.setdefault("volumeMounts", []).append(
        {"name": SHARED_VOLUME, "mountPath": SHARED_MOUNT_PATH}
    )
    container.setdefault("env", []).append({"name": SHARED_ENV, "value": SHARED_MOUNT_PATH})


def _notice_agent(args: RayClusterSpecArgs) -> dict[str, Any]:
    """The agent's container: the same image, the agent's files on its PYTHONPATH, the
    cluster's token as a read-only file (never in its environment, which /proc/*/environ,
    crash reports and `kubectl describe` show), the pod's IP (KubeRay starts Ray on it: that
    is the node to drain)."""
    agent = args.notice_agent
    command = ["python", "-m", NOTICE_AGENT_MODULE,
               "--gcs-address", f"{head_service_name(args.cluster_name)}:{GCS_PORT}",
               "--node-ip", "$(POD_IP)", "--name", "$(POD_NAME)",
               "--poll", f"{agent.budget.poll_s:g}", "--warning", f"{agent.budget.warning_s:g}"]
    if agent.drain_on_rebalance:
        command.append("--drain-on-rebalance")
    return {
        "name": NOTICE_AGENT_CONTAINER,
        "image": args.image,
        "command": command,
        "env": [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "PYTHONPATH", "value": NOTICE_AGENT_ROOT},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
            {"name": "RAY_AUTH_MODE", "value": "token"},
            {"name": TOKEN_PATH_ENV, "value": f"{NOTICE_AGENT_TOKEN_DIR}/{TOKEN_KEY}"},
        ],
        "resources": _limits(NOTICE_AGENT_CPU, NOTICE_AGENT_MEMORY, 0),
        "securityContext": _container_security(),
        "volumeMounts": [{"name": NOTICE_AGENT_VOLUME, "mountPath": NOTICE_AGENT_ROOT,
                          "readOnly": True},
                         {"name": NOTICE_AGENT_TOKEN_VOLUME,
                          "mountPath": NOTICE_AGENT_TOKEN_DIR, "readOnly": True}],
    }


def _notice_agent_volume(cluster_name: str) -> dict[str, Any]:
    return {
        "name": NOTICE_AGENT_VOLUME,
        "configMap": {
            "name": notice_agent_config_map_name(cluster_name),
            "items": [{"key": notice_agent_file_key(path), "path": path}
                      for path in NOTICE_AGENT_FILES],
        },
    }


def _notice_agent_token_volume(cluster_name: str) -> dict[str, Any]:
    return {
        "name": NOTICE_AGENT_TOKEN_VOLUME,
        "secret": {
            "secretName": token_secret_name(cluster_name),
            "items": [{"key": TOKEN_KEY, "path": TOKEN_KEY}],
            "defaultMode": TOKEN_FILE_MODE,
        },
    }


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
