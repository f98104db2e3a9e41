"""The spot cluster's EKS: control plane with KMS-encrypted secrets, network policy
enforcement in the VPC CNI, and one managed node group per node pool.

Node groups start at their minimum size and leave their desired size to the Cluster
Autoscaler (`ignore_scaling_changes`), so `pulumi up` never undoes a scale-up.

Every node group launches from a launch template of the project's own, one per pool, whose
instance metadata options are IMDSv2 only (`httpTokens: required`) with a hop limit of 2. The
hop limit is why the templates are declared here: a pod's packets to IMDS cross one hop more
than the node's own, and with AL2023's default of 1 they never arrive, so the notice agent in
a spot pod (workloads/common/notice_agent.py) could not read its node's two-minute
interruption notice (`/latest/meta-data/spot/instance-action`). pulumi-eks sets hop limit 2
only as a side effect of `enable_imd_sv2`; declaring it makes the dependency explicit and
tested. The price: pods can also read the node role's credentials from IMDS. That role holds
only the EKS worker, CNI, ECR read-only and SSM policies; the pods' own AWS access is their
IRSA role. Each template also tags the instances it launches with the stack and the pool
(vocab/tags.py): the spot pools' FIS experiment templates select their targets by them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from components.iam_documents import EC2_TRUST
from components.placement import PoolPlacement
from vocab.tags import node_pool_instance_tags

_NODE_POLICIES = {
    "worker": "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "cni": "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "registry": "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    "ssm": "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
}
AMI_CPU = "AL2023_x86_64_STANDARD"
AMI_GPU = "AL2023_x86_64_NVIDIA"
"""NVIDIA driver and container toolkit on the node; the device plugin comes from its chart."""
IMDS_HOP_LIMIT = 2
"""The node itself is one hop from IMDS; a pod (its own network namespace) is two."""


@dataclass
class NodePoolArgs:
    placement: PoolPlacement
    instance_types: list[str]
    min_size: int
    max_size: int


@dataclass
class EksClusterArgs:
    stack: str
    """The stack's name, on every instance's tags."""
    cluster_name: str
    kubernetes_version: str
    vpc_id: pulumi.Input[str]
    public_subnet_ids: list[pulumi.Output[str]]
    private_subnet_ids: list[pulumi.Output[str]]
    node_pools: list[NodePoolArgs]
    api_access_cidrs: list[str]
    tags: dict[str, str] = field(default_factory=dict)


class EksCluster(pulumi.ComponentResource):
    """Outputs the kubeconfig, the OIDC provider for IRSA and the secrets key."""

    cluster_name: pulumi.Output[str]
    kubeconfig_json: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]
    secrets_key_arn: pulumi.Output[str]
    created_name: pulumi.Output[str]
    """The cluster's name, known once the control plane exists (for what goes into it)."""
    node_security_group_id: pulumi.Output[str]
    """The security group of every node of the managed node groups, and of their pods."""

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotburst:eks:EksCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        public_endpoint = bool(args.api_access_cidrs)
        secrets_key = aws.kms.Key(
            f"{name}-secrets",
            description=f"Envelope encryption of Kubernetes secrets in {args.cluster_name}",
            enable_key_rotation=True,
            deletion_window_in_days=7,
            tags=args.tags,
            opts=child,
        )
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
            encryption_config_key_arn=secrets_key.arn,
            use_default_vpc_cni=False,
            vpc_cni_options=eks.VpcCniOptionsArgs(enable_network_policy=True),
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
        for pool in args.node_pools:
            placement = pool.placement
            node_template = aws.ec2.LaunchTemplate(
                f"{name}-{placement.name}-nodes",
                description=f"Nodes of pool {placement.name} of {args.cluster_name}: IMDSv2 "
                "only, reachable from pods",
                metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                    http_endpoint="enabled",
                    http_tokens="required",
                    http_put_response_hop_limit=IMDS_HOP_LIMIT,
                ),
                tag_specifications=[
                    aws.ec2.LaunchTemplateTagSpecificationArgs(
                        resource_type="instance",
                        tags=node_pool_instance_tags(args.stack, placement.name),
                    )
                ],
                tags=args.tags,
                opts=child,
            )
            launch_template = aws.eks.NodeGroupLaunchTemplateArgs(
                id=node_template.id, version=node_template.latest_version.apply(str)
            )
            eks.ManagedNodeGroup(
                f"{name}-{placement.name}",
                cluster=cluster,
                node_role_arn=node_role.arn,
                capacity_type="SPOT" if placement.spot else "ON_DEMAND",
                instance_types=pool.instance_types,
                ami_type=AMI_GPU if placement.gpu else AMI_CPU,
                scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                    min_size=pool.min_size, desired_size=pool.min_size, max_size=pool.max_size
                ),
                ignore_scaling_changes=True,
                subnet_ids=args.private_subnet_ids,
                labels=placement.node_labels,
                taints=[aws.eks.NodeGroupTaintArgs(**taint.aws()) for taint in placement.taints]
                or None,
                # With a launch template of its own a node group takes its Kubernetes
                # version from here, not from the cluster (pulumi-eks defaults it only
                # without one); the template names no AMI, so EKS still picks it by ami_type.
                launch_template=launch_template,
                version=args.kubernetes_version,
                tags=args.tags,
                opts=child,
            )

        self.cluster_name = pulumi.Output.from_input(args.cluster_name)
        self.kubeconfig_json = pulumi.Output.secret(cluster.kubeconfig_json)
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.oidc_issuer = cluster.oidc_issuer
        self.secrets_key_arn = secrets_key.arn
        self.created_name = pulumi.Output.all(cluster.kubeconfig_json, args.cluster_name).apply(
            lambda values: str(values[1])
        )
        # Managed node groups whose launch template names no security group get the one EKS
        # creates for the cluster (not pulumi-eks's node group); pods share their node's.
        self.node_security_group_id = aws.eks.get_cluster_output(
            name=self.created_name, opts=pulumi.InvokeOutputOptions(parent=self)
        ).vpc_config.cluster_security_group_id
        self.register_outputs(
            {
                "cluster_name": self.cluster_name,
                "kubeconfig_json": self.kubeconfig_json,
                "oidc_provider_arn": self.oidc_provider_arn,
                "secrets_key_arn": self.secrets_key_arn,
            }
        )
