"""The DOLL experiment: EKS with on-demand head and spot workers, KubeRay, bucket access (IRSA)."""

from __future__ import annotations

import pulumi

from components.bucket_access_role import BucketAccessRole, BucketAccessRoleArgs
from components.data_bucket import DataBucket
from components.kuberay import KubeRay, KubeRayArgs
from components.network import Network, NetworkArgs
from components.raycluster_spec import RayClusterSpecArgs, RayPodShape
from components.spot_eks_cluster import ScalingArgs, SpotEksCluster, SpotEksClusterArgs
from stacks.config import NodeGroupConfig, SpotburstConfig

RAYCLUSTER_NAME = "doll"
SERVICE_ACCOUNT = "ray-pods"
WORKER_GROUP = "spot-workers"


def build_doll(
    config: SpotburstConfig, bucket: DataBucket, tags: dict[str, str]
) -> dict[str, pulumi.Input]:
    """Declare the DOLL cluster; return the stack outputs the run tasks need."""
    doll = config.doll
    cluster_name = f"{config.name_prefix}-doll"
    network = Network(
        "doll",
        NetworkArgs(
            cidr=doll.vpc_cidr,
            az_count=doll.az_count,
            tags=tags,
            public_subnet_tags={"kubernetes.io/role/elb": "1"},
            private_subnet_tags={"kubernetes.io/role/internal-elb": "1"},
        ),
    )
    cluster = SpotEksCluster(
        "doll",
        SpotEksClusterArgs(
            cluster_name=cluster_name,
            kubernetes_version=doll.eks_version,
            vpc_id=network.vpc_id,
            public_subnet_ids=network.public_subnet_ids,
            private_subnet_ids=network.private_subnet_ids,
            head_instance_type=doll.head_nodes.instance_types[0],
            head_scaling=_scaling(doll.head_nodes),
            worker_instance_types=list(doll.worker_nodes.instance_types),
            worker_scaling=_scaling(doll.worker_nodes),
            api_access_cidrs=list(config.admin_cidrs),
            tags=tags,
        ),
    )
    bucket_access = BucketAccessRole(
        "doll-ray-pods",
        BucketAccessRoleArgs(
            oidc_provider_arn=cluster.oidc_provider_arn,
            oidc_issuer=cluster.oidc_issuer,
            namespace=doll.namespace,
            service_account=SERVICE_ACCOUNT,
            bucket_arn=bucket.bucket_arn,
            tags=tags,
        ),
    )
    kuberay = KubeRay(
        "doll",
        KubeRayArgs(
            kubeconfig=cluster.kubeconfig_json,
            chart_version=doll.kuberay_version,
            namespace=doll.namespace,
            cluster_name=RAYCLUSTER_NAME,
            service_account_role_arn=bucket_access.role_arn,
            spec=RayClusterSpecArgs(
                ray_version=config.ray_version,
                image=config.ray_image,
                service_account=SERVICE_ACCOUNT,
                head=RayPodShape(
                    cpu=doll.ray_head.cpu,
                    memory=doll.ray_head.memory,
                    node_selector=cluster.head_node_selector,
                    tolerations=[],
                ),
                worker=RayPodShape(
                    cpu=doll.ray_workers.resources.cpu,
                    memory=doll.ray_workers.resources.memory,
                    node_selector=cluster.worker_node_selector,
                    tolerations=[cluster.spot_toleration],
                ),
                worker_group=WORKER_GROUP,
                min_replicas=doll.ray_workers.min_replicas,
                replicas=doll.ray_workers.replicas,
                max_replicas=doll.ray_workers.max_replicas,
            ),
        ),
    )
    return {
        "dollClusterName": cluster.cluster_name,
        "dollKubeconfig": cluster.kubeconfig_json,
        "dollNamespace": kuberay.namespace,
        "dollRayClusterName": kuberay.raycluster_name,
        "dollHeadService": kuberay.head_service,
    }


def _scaling(group: NodeGroupConfig) -> ScalingArgs:
    return ScalingArgs(group.min_size, group.desired_size, group.max_size)
