"""Every stack output name, in one place: the stack exports under these names and `launch/`
reads them back. (Plain names for now; typed readers may join them here.)"""

from __future__ import annotations

REGION = "region"
BUCKET_NAME = "bucketName"
EXPERIMENTS = "experiments"
RAY_VERSION = "rayVersion"

SPOT_CLUSTER_NAME = "spotClusterName"
"""The shared EKS cluster's name."""
SPOT_CLUSTER_POOLS = "spotClusterNodePools"
"""Node pool name -> {capacity, instanceTypes, minSize, maxSize}."""

BURST_INSTANCE_IDS = "burstInstanceIds"
BURST_PRIVATE_IPS = "burstPrivateIps"
BURST_HEAD_ADDRESS = "burstHeadAddress"
BURST_SITE_CIDRS = "burstSiteCidrs"
BURST_EFS = "burstEfs"
BURST_TOKEN_PARAMETER = "burstTokenParameter"
"""SSM SecureString parameter holding the burst cluster's Ray token."""


def kubeconfig(experiment: str) -> str:
    """The spot cluster's kubeconfig (secret), repeated per experiment for its run path."""
    return f"{experiment}Kubeconfig"


def namespace(experiment: str) -> str:
    return f"{experiment}Namespace"


def raycluster_name(experiment: str) -> str:
    return f"{experiment}RayClusterName"


def head_service(experiment: str) -> str:
    """`<name>-head-svc`: dashboard and Jobs API (8265), reached through a port-forward."""
    return f"{experiment}HeadService"


def token_secret(experiment: str) -> str:
    """Kubernetes Secret in the experiment's namespace; key `auth_token` holds the Ray token."""
    return f"{experiment}TokenSecret"


def ray_cluster_outputs(experiment: str) -> tuple[str, ...]:
    """What a `--stack` run of an EKS experiment needs."""
    return (
        kubeconfig(experiment),
        namespace(experiment),
        head_service(experiment),
        token_secret(experiment),
    )
