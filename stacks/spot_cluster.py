"""The shared EKS "spot cluster": one VPC, one control plane, one KubeRay operator, the node
pools and their autoscaler, an AWS FIS experiment template per spot pool (real
interruptions on demand), the stack's shared EFS file system (unless `sharedStorage: none`),
and one RayCluster per enabled EKS experiment (doll, elastic, rl, inference), each in its
own namespace with its own bucket access (IRSA), the shared file system mounted in every
pod and, in its spot pods, the notice agent."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.cluster_autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from components.data_bucket import DataBucket
from components.eks_cluster import EksCluster, EksClusterArgs, NodePoolArgs
from components.gcs_redis import GcsRedis, GcsRedisArgs
from components.gpu_device_plugin import GpuDevicePlugin, GpuDevicePluginArgs
from components.iam_documents import bucket_read_write_policy
from components.kuberay_operator import KubeRayOperator, KubeRayOperatorArgs
from components.network import Network, NetworkArgs, split_cidr
from components.placement import PoolPlacement
from components.ray_cluster import RayCluster, RayClusterArgs, SharedVolumeArgs
from components.raycluster_spec import (
    GcsFaultToleranceArgs,
    NoticeAgentArgs,
    RayClusterSpecArgs,
    RayHeadArgs,
    WorkerGroupArgs,
    gcs_password_secret_name,
)
from components.service_account_role import ServiceAccountRole, ServiceAccountRoleArgs
from components.shared_file_system import SharedFileSystem, SharedFileSystemArgs
from components.spot_interruptions import SpotInterruptions, SpotInterruptionsArgs
from stacks import outputs
from stacks.config_types import (
    API_ENDPOINT_PRIVATE,
    GCS_FAULT_TOLERANT,
    HEAD_POOL,
    NODE_POOLS,
    NodePoolConfig,
    RayClusterConfig,
    SpotburstConfig,
)
from vocab.spot import CAPACITY_SPOT, NOTICE_AGENT_FILES, node_labels

SERVICE_ACCOUNT = "ray-pods"
PROJECT_ROOT = Path(__file__).resolve().parents[1]


def notice_agent_files() -> dict[str, str]:
    """The notice agent's files as they are in this checkout: what every spot pod runs."""
    return {path: (PROJECT_ROOT / path).read_text() for path in NOTICE_AGENT_FILES}


def placement(pool_key: str) -> PoolPlacement:
    kind = NODE_POOLS[pool_key]
    return PoolPlacement(kind.name, spot=kind.capacity == CAPACITY_SPOT, gpu=kind.gpu)


def build_spot_cluster(
    config: SpotburstConfig, bucket: DataBucket, tags: dict[str, str], aws_provider: aws.Provider
) -> dict[str, pulumi.Input]:
    """Declare the spot cluster; return the stack outputs the run tasks need. Every AWS
    resource goes through `aws_provider` (its default tags mark the stack's resources)."""
    on_aws = pulumi.ResourceOptions(providers={"aws": aws_provider})
    spot = config.spot_cluster
    assert spot is not None, "parse_config requires spotCluster when an EKS experiment is on"
    cluster_name = f"{config.name_prefix}-spot"
    pools = spot.used_pools(config.ray_clusters)
    network = Network(
        "spot-cluster",
        NetworkArgs(
            cidr=spot.vpc_cidr,
            az_count=spot.az_count,
            tags=tags,
            public_subnet_tags={"kubernetes.io/role/elb": "1"},
            private_subnet_tags={"kubernetes.io/role/internal-elb": "1"},
        ),
        opts=on_aws,
    )
    cluster = EksCluster(
        "eks",
        EksClusterArgs(
            stack=config.stack,
            cluster_name=cluster_name,
            kubernetes_version=spot.eks_version,
            vpc_id=network.vpc_id,
            public_subnet_ids=network.public_subnet_ids,
            private_subnet_ids=network.private_subnet_ids,
            node_pools=[
                NodePoolArgs(
                    placement(pool.kind.key),
                    list(pool.instance_types),
                    pool.min_size,
                    pool.max_size,
                )
                for pool in pools
            ],
            # Empty: a private endpoint, for a deployer inside the VPC (apiEndpoint: private).
            api_access_cidrs=(
                [] if config.api_endpoint == API_ENDPOINT_PRIVATE else list(config.admin_cidrs)
            ),
            tags=tags,
        ),
        opts=on_aws,
    )
    provider = k8s.Provider("spot-k8s", kubeconfig=cluster.kubeconfig_json)
    in_cluster = pulumi.ResourceOptions(providers={"kubernetes": provider, "aws": aws_provider})
    head_nodes = placement(HEAD_POOL).node_selector
    operator = KubeRayOperator(
        "kuberay",
        KubeRayOperatorArgs(chart_version=spot.kuberay_version, node_selector=head_nodes),
        opts=in_cluster,
    )
    ClusterAutoscaler(
        "cluster-autoscaler",
        ClusterAutoscalerArgs(
            cluster_name=cluster_name,
            region=config.region,
            version=spot.cluster_autoscaler_version,
            chart_version=spot.cluster_autoscaler_chart,
            oidc_provider_arn=cluster.oidc_provider_arn,
            oidc_issuer=cluster.oidc_issuer,
            node_selector=head_nodes,
            tags=tags,
        ),
        opts=in_cluster,
    )
    if any(pool.kind.gpu for pool in pools):
        GpuDevicePlugin(
            "nvidia-device-plugin",
            GpuDevicePluginArgs(chart_version=spot.nvidia_device_plugin_version),
            opts=in_cluster,
        )
    exported: dict[str, pulumi.Input] = {
        outputs.SPOT_CLUSTER_NAME: cluster.cluster_name,
        outputs.SPOT_CLUSTER_POOLS: {pool.kind.name: _pool_output(pool) for pool in pools},
    }
    spot_pools = [pool.kind.name for pool in pools if pool.kind.capacity == CAPACITY_SPOT]
    if spot_pools:
        interruptions = SpotInterruptions(
            "spot-interruptions",
            SpotInterruptionsArgs(
                stack=config.stack, region=config.region, pools=spot_pools, tags=tags
            ),
            opts=on_aws,
        )
        exported[outputs.SPOT_INTERRUPTION_TEMPLATES] = interruptions.template_ids
    shared_volume = None
    if spot.shared_storage is not None:
        shared = SharedFileSystem(
            "shared-data",
            SharedFileSystemArgs(
                cluster_name=cluster.created_name,
                vpc_id=network.vpc_id,
                private_subnet_ids=network.private_subnet_ids,
                node_security_group_id=cluster.node_security_group_id,
                oidc_provider_arn=cluster.oidc_provider_arn,
                oidc_issuer=cluster.oidc_issuer,
                throughput_mode=spot.shared_storage.throughput_mode,
                infrequent_access_after_days=spot.shared_storage.infrequent_access_after_days,
                tags=tags,
                nodes=[cluster],
            ),
            opts=in_cluster,
        )
        shared_volume = SharedVolumeArgs(shared.volume_handle, shared.storage_class, shared.ready)
        exported[outputs.SHARED_FILE_SYSTEM] = shared.file_system_id
    agent_files = notice_agent_files()
    for experiment, ray in config.ray_clusters.items():
        access = ServiceAccountRole(
            f"{experiment}-ray-pods",
            ServiceAccountRoleArgs(
                oidc_provider_arn=cluster.oidc_provider_arn,
                oidc_issuer=cluster.oidc_issuer,
                namespace=ray.namespace,
                service_account=SERVICE_ACCOUNT,
                policy=bucket.bucket_arn.apply(bucket_read_write_policy),
                policy_name="bucket",
                tags=tags,
            ),
            opts=on_aws,
        )
        spec = _spec(config, ray)
        redis_password = None
        if experiment in GCS_FAULT_TOLERANT:
            redis = GcsRedis(
                f"{experiment}-gcs-redis",
                GcsRedisArgs(
                    vpc_id=network.vpc_id,
                    subnet_ids=network.private_subnet_ids,
                    client_cidrs=split_cidr(spot.vpc_cidr, spot.az_count)[1],
                    tags=tags,
                ),
                opts=on_aws,
            )
            spec.gcs_fault_tolerance = GcsFaultToleranceArgs(
                redis.address, gcs_password_secret_name(experiment)
            )
            redis_password = redis.password
        deployed = RayCluster(
            experiment,
            RayClusterArgs(
                namespace=ray.namespace,
                cluster_name=experiment,
                service_account_role_arn=access.role_arn,
                spec=spec,
                operator=operator.release,
                gcs_redis_password=redis_password,
                notice_agent_files=agent_files,
                shared_volume=shared_volume,
            ),
            opts=in_cluster,
        )
        exported.update(
            {
                outputs.kubeconfig(experiment): cluster.kubeconfig_json,
                outputs.namespace(experiment): deployed.namespace,
                outputs.raycluster_name(experiment): deployed.raycluster_name,
                outputs.head_service(experiment): deployed.head_service,
                outputs.token_secret(experiment): deployed.token_secret,
            }
        )
    return exported


def _spec(config: SpotburstConfig, ray: RayClusterConfig) -> RayClusterSpecArgs:
    assert config.spot_cluster is not None
    return RayClusterSpecArgs(
        cluster_name=ray.experiment,
        ray_version=config.ray_version,
        image=config.ray_image,
        service_account=SERVICE_ACCOUNT,
        head=RayHeadArgs(ray.head.cpu, ray.head.memory, placement(HEAD_POOL)),
        worker_groups=[
            WorkerGroupArgs(
                name=group.name,
                cpu=group.resources.cpu,
                memory=group.resources.memory,
                gpu=group.gpu,
                placement=placement(group.node_pool),
                min_replicas=group.min_replicas,
                replicas=group.replicas,
                max_replicas=group.max_replicas,
                ray_resources=dict(group.placement),
                ray_labels=node_labels(NODE_POOLS[group.node_pool].ray_pool),
            )
            for group in ray.worker_groups
        ],
        ray_autoscaler=ray.ray_autoscaler,
        notice_agent=NoticeAgentArgs(drain_on_rebalance=config.spot_cluster.drain_on_rebalance),
    )


def _pool_output(pool: NodePoolConfig) -> dict[str, object]:
    return {
        "capacity": pool.kind.capacity,
        "gpu": pool.kind.gpu,
        "instanceTypes": list(pool.instance_types),
        "minSize": pool.min_size,
        "maxSize": pool.max_size,
    }
