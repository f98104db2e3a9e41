"""A shared file system: encrypted EFS, a mount target per zone, NFS from its clients only.

Each burst site has one (NFS from the site's CIDR); the spot cluster has one for the whole
stack (NFS from the cluster's node security group only).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

NFS_PORT = 2049


@dataclass
class SiteStorageArgs:
    vpc_id: pulumi.Input[str]
    site_cidr: str | None
    """NFS from this block; None: only from `client_security_group_ids`."""
    subnet_ids: list[pulumi.Output[str]]
    """One subnet per availability zone the site uses (EFS allows one mount target per zone)."""
    tags: dict[str, str] = field(default_factory=dict)
    client_security_group_ids: list[pulumi.Input[str]] = field(default_factory=list)
    """NFS from members of these security groups."""
    throughput_mode: str = "elastic"
    infrequent_access_after_days: int | None = None
    """Move files untouched this long to Infrequent Access (and back on first access)."""


class SiteStorage(pulumi.ComponentResource):
    file_system_id: pulumi.Output[str]
    file_system_arn: pulumi.Output[str]
    mount_ip: pulumi.Output[str]
    mount_targets: list[aws.efs.MountTarget]

    def __init__(
        self, name: str, args: SiteStorageArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotburst:storage:SiteStorage", name, None, opts)
        if args.site_cidr is None and not args.client_security_group_ids:
            raise ValueError(f"{name}: NFS needs its clients (a CIDR or security groups)")
        child = pulumi.ResourceOptions(parent=self)
        lifecycle = []
        if args.infrequent_access_after_days is not None:
            days = args.infrequent_access_after_days
            lifecycle = [
                aws.efs.FileSystemLifecyclePolicyArgs(
                    transition_to_ia=f"AFTER_{days}_DAY{'S' if days > 1 else ''}"
                ),
                aws.efs.FileSystemLifecyclePolicyArgs(
                    transition_to_primary_storage_class="AFTER_1_ACCESS"
                ),
            ]
        file_system = aws.efs.FileSystem(
            f"{name}-efs",
            encrypted=True,
            throughput_mode=args.throughput_mode,
            lifecycle_policies=lifecycle or None,
            tags={**args.tags, "Name": f"{name}-efs"},
            opts=child,
        )
        clients = []
        if args.site_cidr is not None:
            clients.append(
                aws.ec2.SecurityGroupIngressArgs(
                    protocol="tcp",
                    from_port=NFS_PORT,
                    to_port=NFS_PORT,
                    cidr_blocks=[args.site_cidr],
                    description="NFS from this site",
                )
            )
        if args.client_security_group_ids:
            clients.append(
                aws.ec2.SecurityGroupIngressArgs(
                    protocol="tcp",
                    from_port=NFS_PORT,
                    to_port=NFS_PORT,
                    security_groups=args.client_security_group_ids,
                    description="NFS from the client security groups",
                )
            )
        source = args.site_cidr or "its client security groups"
        nfs = aws.ec2.SecurityGroup(
            f"{name}-nfs",
            vpc_id=args.vpc_id,
            description=f"NFS to {name} EFS from {source} only",
            ingress=clients,
            tags=args.tags,
            opts=child,
        )
        self.mount_targets = [
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
        self.file_system_arn = file_system.arn
        self.mount_ip = self.mount_targets[0].ip_address
        self.register_outputs({"file_system_id": self.file_system_id, "mount_ip": self.mount_ip})
