"""Ray's fixed ports open between the two sites only; SSH only from the admin CIDRs."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from vocab.ports import RayPorts

SSH_PORT = 22


@dataclass
class RaySecurityGroupArgs:
    vpc_id: pulumi.Input[str]
    site_cidrs: list[str]
    admin_cidrs: list[str]
    tags: dict[str, str] = field(default_factory=dict)


class RaySecurityGroup(pulumi.ComponentResource):
    security_group_id: pulumi.Output[str]

    def __init__(
        self, name: str, args: RaySecurityGroupArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotburst:network:RaySecurityGroup", name, None, opts)
        ingress = [
            aws.ec2.SecurityGroupIngressArgs(
                protocol="tcp",
                from_port=first,
                to_port=last,
                cidr_blocks=args.site_cidrs,
                description="Ray between the sites",
            )
            for first, last in RayPorts().between_nodes()
        ]
        if args.admin_cidrs:
            ingress.append(
                aws.ec2.SecurityGroupIngressArgs(
                    protocol="tcp",
                    from_port=SSH_PORT,
                    to_port=SSH_PORT,
                    cidr_blocks=args.admin_cidrs,
                    description="SSH from adminCidrs",
                )
            )
        group = aws.ec2.SecurityGroup(
            name,
            vpc_id=args.vpc_id,
            description="Ray nodes: Ray ports between the sites, SSH from adminCidrs",
            ingress=ingress,
            egress=[
                aws.ec2.SecurityGroupEgressArgs(
                    protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"]
                )
            ],
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.security_group_id = group.id
        self.register_outputs({"security_group_id": self.security_group_id})
