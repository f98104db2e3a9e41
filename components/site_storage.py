"""One site's shared file system: encrypted EFS, a mount target per zone, NFS from the site only."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

NFS_PORT = 2049


@dataclass
class SiteStorageArgs:
    vpc_id: pulumi.Input[str]
    site_cidr: str
    subnet_ids: list[pulumi.Output[str]]
    """One subnet per availability zone the site uses (EFS allows one mount target per zone)."""
    tags: dict[str, str] = field(default_factory=dict)


class SiteStorage(pulumi.ComponentResource):
    file_system_id: pulumi.Output[str]
    mount_ip: pulumi.Output[str]

    def __init__(
        self, name: str, args: SiteStorageArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotburst:storage:SiteStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        file_system = aws.efs.FileSystem(
            f"{name}-efs",
            encrypted=True,
            throughput_mode="elastic",
            tags={**args.tags, "Name": f"{name}-efs"},
            opts=child,
        )
        nfs = aws.ec2.SecurityGroup(
            f"{name}-nfs",
            vpc_id=args.vpc_id,
            description=f"NFS to {name} EFS from {args.site_cidr} only",
            ingress=[
                aws.ec2.SecurityGroupIngressArgs(
                    protocol="tcp",
                    from_port=NFS_PORT,
                    to_port=NFS_PORT,
                    cidr_blocks=[args.site_cidr],
                    description="NFS from this site",
                )
            ],
            tags=args.tags,
            opts=child,
        )
        targets = [
            aws.efs.MountTarget(
                f"{name}-mount-{index}",
                file_system_id=file_system.id,
                subnet_id=subnet_id,
                security_groups=[nfs.id],
                opts=child,
            )
            for index, subnet_id in enumerate(args.subnet_ids)
        ]
        self.file_system_id = file_system.id
        self.mount_ip = targets[0].ip_address
        self.register_outputs({"file_system_id": self.file_system_id, "mount_ip": self.mount_ip})
