"""The HPC→cloud burst test platform: an on-prem and a cloud site joined by VPC peering.

Each site has its own network, its own encrypted EFS (sites never share storage) and its Ray
nodes: the login node (Ray head) and HPC workers on-prem, cloud nodes in the cloud. Nodes are
reached through SSM; Ray's fixed ports are open between the two site CIDRs only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.cloud_init import HEAD_CPUS, NodeBoot, render_user_data
from components.network import Network, NetworkArgs
from components.node_instance_role import NodeInstanceRole, NodeInstanceRoleArgs
from components.ray_node import RayNode, RayNodeArgs
from components.ray_security_group import RaySecurityGroup, RaySecurityGroupArgs
from components.ray_token_parameter import RayTokenParameter, RayTokenParameterArgs
from components.site_storage import SiteStorage, SiteStorageArgs
from vocab.burst import ROLE_CLOUD, ROLE_HPC, ROLE_LOGIN, SITE_CLOUD, SITE_ONPREM

AL2023_NAME = "al2023-ami-2023.*-x86_64"


@dataclass
class BurstSitesArgs:
    onprem_cidr: str
    cloud_cidr: str
    instance_type: str
    hpc_workers: int
    cloud_nodes: int
    login_disk_gb: int
    worker_disk_gb: int
    admin_cidrs: list[str]
    bucket_arn: pulumi.Input[str]
    packages: list[str]
    region: str
    token_parameter_name: str
    tags: dict[str, str] = field(default_factory=dict)


class BurstSites(pulumi.ComponentResource):
    instance_ids: dict[str, list[pulumi.Output[str]]]
    private_ips: dict[str, list[pulumi.Output[str]]]
    head_ip: pulumi.Output[str]
    file_system_ids: dict[str, pulumi.Output[str]]
    mount_ips: dict[str, pulumi.Output[str]]
    token_parameter_name: pulumi.Output[str]

    def __init__(self, name: str, args: BurstSitesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotburst:burst:BurstSites", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        site_cidrs = {SITE_ONPREM: args.onprem_cidr, SITE_CLOUD: args.cloud_cidr}
        networks = {
            SITE_ONPREM: Network(
                f"{name}-{SITE_ONPREM}",
                NetworkArgs(cidr=args.onprem_cidr, az_count=1, tags=args.tags),
                opts=child,
            ),
            SITE_CLOUD: Network(
                f"{name}-{SITE_CLOUD}",
                NetworkArgs(
                    cidr=args.cloud_cidr, az_count=1, private_subnets=False, tags=args.tags
                ),
                opts=child,
            ),
        }
        self._peer(name, networks, site_cidrs, args.tags)
        # Where each role's nodes live: HPC workers private behind NAT, the rest public subnets.
        node_subnets = {
            ROLE_LOGIN: networks[SITE_ONPREM].public_subnet_ids[0],
            ROLE_HPC: networks[SITE_ONPREM].private_subnet_ids[0],
            ROLE_CLOUD: networks[SITE_CLOUD].public_subnet_ids[0],
        }
        storage = {
            site: SiteStorage(
                f"{name}-{site}",
                SiteStorageArgs(
                    vpc_id=networks[site].vpc_id,
                    site_cidr=site_cidrs[site],
                    subnet_ids=[node_subnets[ROLE_HPC if site == SITE_ONPREM else ROLE_CLOUD]],
                    tags=args.tags,
                ),
                opts=child,
            )
            for site in (SITE_ONPREM, SITE_CLOUD)
        }
        security_groups = {
            site: RaySecurityGroup(
                f"{name}-{site}-ray",
                RaySecurityGroupArgs(
                    vpc_id=networks[site].vpc_id,
                    site_cidrs=list(site_cidrs.values()),
                    admin_cidrs=args.admin_cidrs,
                    tags=args.tags,
                ),
                opts=child,
            )
            for site in (SITE_ONPREM, SITE_CLOUD)
        }
        role = NodeInstanceRole(
            f"{name}-nodes",
            NodeInstanceRoleArgs(bucket_arn=args.bucket_arn, tags=args.tags),
            opts=child,
        )
        token = RayTokenParameter(
            f"{name}-ray-token",
            RayTokenParameterArgs(
                parameter_name=args.token_parameter_name,
                reader_role_id=role.role_id,
                tags=args.tags,
            ),
            opts=child,
        )
        ami = aws.ec2.get_ami_output(
            most_recent=True,
            owners=["amazon"],
            filters=[aws.ec2.GetAmiFilterArgs(name="name", values=[AL2023_NAME])],
            opts=pulumi.InvokeOutputOptions(parent=self),
        )
        vcpus = aws.ec2.get_instance_type_output(
            instance_type=args.instance_type, opts=pulumi.InvokeOutputOptions(parent=self)
        ).default_vcpus

        def node(role_name: str, index: int, site: str, user_data: pulumi.Output[str]) -> RayNode:
            return RayNode(
                f"{name}-{role_name}-{index}",
                RayNodeArgs(
                    role=role_name,
                    ami_id=ami.id,
                    instance_type=args.instance_type,
                    subnet_id=node_subnets[role_name],
                    security_group_id=security_groups[site].security_group_id,
                    instance_profile_name=role.instance_profile_name,
                    public_ip=role_name != ROLE_HPC,
                    disk_gb=args.login_disk_gb if role_name == ROLE_LOGIN else args.worker_disk_gb,
                    user_data=user_data,
                    tags=args.tags,
                ),
                opts=child,
            )

        def joining(role_name: str, site: str) -> pulumi.Output[str]:
            return pulumi.Output.all(storage[site].mount_ip, login.private_ip, vcpus).apply(
                lambda values: render_user_data(
                    NodeBoot(
                        role_name,
                        int(values[2]),
                        values[0],
                        args.packages,
                        args.token_parameter_name,
                        args.region,
                        head_ip=values[1],
                    )
                )
            )

        login = node(
            ROLE_LOGIN,
            0,
            SITE_ONPREM,
            storage[SITE_ONPREM].mount_ip.apply(
                lambda ip: render_user_data(
                    NodeBoot(
                        ROLE_LOGIN,
                        HEAD_CPUS,
                        ip,
                        args.packages,
                        args.token_parameter_name,
                        args.region,
                    )
                )
            ),
        )
        hpc = [
            node(ROLE_HPC, i, SITE_ONPREM, joining(ROLE_HPC, SITE_ONPREM))
            for i in range(args.hpc_workers)
        ]
        cloud = [
            node(ROLE_CLOUD, i, SITE_CLOUD, joining(ROLE_CLOUD, SITE_CLOUD))
            for i in range(args.cloud_nodes)
        ]

        nodes = {ROLE_LOGIN: [login], ROLE_HPC: hpc, ROLE_CLOUD: cloud}
        self.instance_ids = {
            role_name: [n.instance_id for n in group] for role_name, group in nodes.items()
        }
        self.private_ips = {
            role_name: [n.private_ip for n in group] for role_name, group in nodes.items()
        }
        self.head_ip = login.private_ip
        self.file_system_ids = {site: storage[site].file_system_id for site in storage}
        self.mount_ips = {site: storage[site].mount_ip for site in storage}
        self.token_parameter_name = token.parameter_name
        self.register_outputs({"instance_ids": self.instance_ids, "private_ips": self.private_ips})

    def _peer(
        self,
        name: str,
        networks: dict[str, Network],
        site_cidrs: dict[str, str],
        tags: dict[str, str],
    ) -> None:
        """Peer the two VPCs and route each site's every route table to the other site."""
        peering = aws.ec2.VpcPeeringConnection(
            f"{name}-peering",
            vpc_id=networks[SITE_ONPREM].vpc_id,
            peer_vpc_id=networks[SITE_CLOUD].vpc_id,
            auto_accept=True,
            tags={**tags, "Name": f"{name}-peering"},
            opts=pulumi.ResourceOptions(parent=self),
        )
        for site, peer in ((SITE_ONPREM, SITE_CLOUD), (SITE_CLOUD, SITE_ONPREM)):
            for index, route_table_id in enumerate(networks[site].route_table_ids):
                aws.ec2.Route(
                    f"{name}-{site}-to-{peer}-{index}",
                    route_table_id=route_table_id,
                    destination_cidr_block=site_cidrs[peer],
                    vpc_peering_connection_id=peering.id,
                    opts=pulumi.ResourceOptions(parent=self),
                )
