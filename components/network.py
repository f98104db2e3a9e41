"""A VPC with public subnets over N availability zones and, optionally, private ones behind NAT."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws


@dataclass
class NetworkArgs:
    cidr: str
    az_count: int
    private_subnets: bool = True
    tags: dict[str, str] = field(default_factory=dict)
    public_subnet_tags: dict[str, str] = field(default_factory=dict)
    private_subnet_tags: dict[str, str] = field(default_factory=dict)


def split_cidr(cidr: str, az_count: int) -> tuple[list[str], list[str]]:
    """Public and private subnet blocks: 2 x az_count equal blocks, 16 per VPC at most."""
    network = ipaddress.ip_network(cidr)
    blocks = [str(block) for block in network.subnets(new_prefix=network.prefixlen + 4)]
    return blocks[:az_count], blocks[az_count : 2 * az_count]


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    public_subnet_ids: list[pulumi.Output[str]]
    private_subnet_ids: list[pulumi.Output[str]]
    route_table_ids: list[pulumi.Output[str]]
    """Every route table of the VPC: where routes to a peered network must go."""

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotburst:network:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        zones = aws.get_availability_zones_output(
            state="available", opts=pulumi.InvokeOutputOptions(parent=self)
        )
        zone_names = zones.names.apply(lambda names: _first_zones(names, args.az_count))

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args.cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={**args.tags, "Name": f"{name}-vpc"},
            opts=child,
        )
        gateway = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=args.tags, opts=child)
        public_routes = aws.ec2.RouteTable(
            f"{name}-public",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=gateway.id)],
            tags=args.tags,
            opts=child,
        )
        public_blocks, private_blocks = split_cidr(args.cidr, args.az_count)
        public_tags = {**args.tags, **args.public_subnet_tags}
        public_subnets = [
            self._subnet(
                f"{name}-public-{i}", vpc, block, zone_names, i, public_tags, public_routes
            )
            for i, block in enumerate(public_blocks)
        ]
        self.vpc_id = vpc.id
        self.public_subnet_ids = [subnet.id for subnet in public_subnets]
        self.private_subnet_ids = []
        self.route_table_ids = [public_routes.id]

        if args.private_subnets:
            nat_address = aws.ec2.Eip(f"{name}-nat", domain="vpc", tags=args.tags, opts=child)
            nat = aws.ec2.NatGateway(
                f"{name}-nat",
                allocation_id=nat_address.id,
                subnet_id=public_subnets[0].id,
                tags=args.tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway]),
            )
            private_routes = aws.ec2.RouteTable(
                f"{name}-private",
                vpc_id=vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
                tags=args.tags,
                opts=child,
            )
            private_tags = {**args.tags, **args.private_subnet_tags}
            private_subnets = [
                self._subnet(
                    f"{name}-private-{i}", vpc, block, zone_names, i, private_tags, private_routes
                )
                for i, block in enumerate(private_blocks)
            ]
            self.private_subnet_ids = [subnet.id for subnet in private_subnets]
            self.route_table_ids.append(private_routes.id)

        self.register_outputs(
            {
                "vpc_id": self.vpc_id,
                "public_subnet_ids": self.public_subnet_ids,
                "private_subnet_ids": self.private_subnet_ids,
            }
        )

    def _subnet(
        self,
        name: str,
        vpc: aws.ec2.Vpc,
        block: str,
        zone_names: pulumi.Output[list[str]],
        index: int,
        tags: dict[str, str],
        routes: aws.ec2.RouteTable,
    ) -> aws.ec2.Subnet:
        subnet = aws.ec2.Subnet(
            name,
            vpc_id=vpc.id,
            cidr_block=block,
            availability_zone=zone_names[index],
            map_public_ip_on_launch=False,
            tags={**tags, "Name": name},
            opts=pulumi.ResourceOptions(parent=self),
        )
        aws.ec2.RouteTableAssociation(
            name,
            subnet_id=subnet.id,
            route_table_id=routes.id,
            opts=pulumi.ResourceOptions(parent=self),
        )
        return subnet


def _first_zones(names: list[str], count: int) -> list[str]:
    if len(names) < count:
        raise ValueError(
            f"azCount is {count} but the region offers only {len(names)} zones: {names}"
        )
    return names[:count]
