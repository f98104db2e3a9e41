"""An EKS cluster with an on-demand node group for the Ray head and spot groups for workers."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from components.iam_documents import EC2_TRUST

NODE_POOL_LABEL = "spotburst.io/node-pool"
SPOT_TAINT_KEY = "spotburst.io/spot"
_NODE_POLICIES = {
    "worker": "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "cni": "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "registry": "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    "ssm": "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
}


@dataclass
class ScalingArgs:
    min_size: int
    desired_size: int
    max_size: int


@dataclass
class SpotEksClusterArgs:
    cluster_name: str
    kubernetes_version: str
    vpc_id: pulumi.Input[str]
    public_subnet_ids: list[pulumi.Output[str]]
    private_subnet_ids: list[pulumi.Output[str]]
    head_instance_type: str
    head_scaling: ScalingArgs
    worker_instance_types: list[str]
    worker_scaling: ScalingArgs
    api_access_cidrs: list[str]
    tags: dict[str, str] = field(default_factory=dict)


class SpotEksCluster(pulumi.ComponentResource):
    """Outputs the kubeconfig and OIDC provider; exposes the selectors Ray pods must use."""

    cluster_name: pulumi.Output[str]
    kubeconfig_json: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]
    head_node_selector: dict[str, str] = {NODE_POOL_LABEL: "ray-head"}
    worker_node_selector: dict[str, str] = {NODE_POOL_LABEL: "ray-worker"}
    spot_toleration: dict[str, str] = {
        "key": SPOT_TAINT_KEY,
        "operator": "Equal",
        "value": "true",
        "effect": "NoSchedule",
    }

    def __init__(
        self, name: str, args: SpotEksClusterArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotburst:eks:SpotEksCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        public_endpoint = bool(args.api_access_cidrs)
        cluster = eks.Cluster(
            f"{name}-cluster",
            name=args.cluster_name,
            version=args.kubernetes_version,
            vpc_id=args.vpc_id,
            public_subnet_ids=args.public_subnet_ids,
            private_subnet_ids=args.private_subnet_ids,
            node_associate_public_ip_address=False,
            skip_default_node_group=True,
            create_oidc_provider=True,
            authentication_mode=eks.AuthenticationMode.API,
            endpoint_private_access=True,
            endpoint_public_access=public_endpoint,
            public_access_cidrs=list(args.api_access_cidrs) if public_endpoint else None,
            tags=args.tags,
            opts=child,
        )
        node_role = aws.iam.Role(
            f"{name}-node-role",
            assume_role_policy=EC2_TRUST,
            tags=args.tags,
            opts=child,
        )
        for short_name, policy_arn in _NODE_POLICIES.items():
            aws.iam.RolePolicyAttachment(
                f"{name}-node-{short_name}", role=node_role.name, policy_arn=policy_arn, opts=child
            )

        eks.ManagedNodeGroup(
            f"{name}-ray-head",
            cluster=cluster,
            node_role_arn=node_role.arn,
            capacity_type="ON_DEMAND",
            instance_types=[args.head_instance_type],
            scaling_config=_scaling(args.head_scaling),
            subnet_ids=args.private_subnet_ids,
            labels=self.head_node_selector,
            enable_imd_sv2=True,
            tags=args.tags,
            opts=child,
        )
        eks.ManagedNodeGroup(
            f"{name}-ray-workers",
            cluster=cluster,
            node_role_arn=node_role.arn,
            capacity_type="SPOT",
            instance_types=args.worker_instance_types,
            scaling_config=_scaling(args.worker_scaling),
            subnet_ids=args.private_subnet_ids,
            labels=self.worker_node_selector,
            taints=[
                aws.eks.NodeGroupTaintArgs(key=SPOT_TAINT_KEY, value="true", effect="NO_SCHEDULE")
            ],
            enable_imd_sv2=True,
            tags=args.tags,
            opts=child,
        )

        self.cluster_name = pulumi.Output.from_input(args.cluster_name)
        self.kubeconfig_json = pulumi.Output.secret(cluster.kubeconfig_json)
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.oidc_issuer = cluster.oidc_issuer
        self.register_outputs(
            {
                "cluster_name": self.cluster_name,
                "kubeconfig_json": self.kubeconfig_json,
                "oidc_provider_arn": self.oidc_provider_arn,
            }
        )


def _scaling(scaling: ScalingArgs) -> aws.eks.NodeGroupScalingConfigArgs:
    return aws.eks.NodeGroupScalingConfigArgs(
        min_size=scaling.min_size, desired_size=scaling.desired_size, max_size=scaling.max_size
    )
