"""One EC2 node of the burst sites: IMDSv2 only, encrypted root volume, cloud-init user data."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws


@dataclass
class RayNodeArgs:
    role: str
    ami_id: pulumi.Input[str]
    instance_type: str
    subnet_id: pulumi.Input[str]
    security_group_id: pulumi.Input[str]
    instance_profile_name: pulumi.Input[str]
    public_ip: bool
    disk_gb: int
    user_data: pulumi.Input[str]
    tags: dict[str, str] = field(default_factory=dict)


class RayNode(pulumi.ComponentResource):
    instance_id: pulumi.Output[str]
    private_ip: pulumi.Output[str]

    def __init__(self, name: str, args: RayNodeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotburst:burst:RayNode", name, None, opts)
        instance = aws.ec2.Instance(
            name,
            ami=args.ami_id,
            instance_type=args.instance_type,
            subnet_id=args.subnet_id,
            vpc_security_group_ids=[args.security_group_id],
            iam_instance_profile=args.instance_profile_name,
            associate_public_ip_address=args.public_ip,
            metadata_options=aws.ec2.InstanceMetadataOptionsArgs(
                http_tokens="required", http_endpoint="enabled", http_put_response_hop_limit=1
            ),
            root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
                encrypted=True, volume_size=args.disk_gb, volume_type="gp3"
            ),
            user_data=args.user_data,
            user_data_replace_on_change=True,
            tags={**args.tags, "Name": name, "spotburst-role": args.role},
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.instance_id = instance.id
        self.private_ip = instance.private_ip
        self.register_outputs({"instance_id": self.instance_id, "private_ip": self.private_ip})
