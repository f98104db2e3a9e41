"""The spot cluster's shared file system: one encrypted EFS for the whole stack, reached by
every Ray pod through the AWS EFS CSI driver.

The file system (components/site_storage.py) has a mount target in each private subnet and
admits NFS only from the cluster's node security group (the pods' traffic leaves from their
node's interfaces). One access point roots every mount at SHARED_ROOT, owned by the Ray
pods' user, and makes every client that user: the pods write as uid 1000 / gid 100 whatever
the NFS server thinks of them. The driver runs as the EKS add-on `aws-efs-csi-driver`, its
controller's service account with an IAM role (IRSA) scoped to this file system and access
point. Each RayCluster then claims the file system through a PersistentVolume of its own
(components/ray_cluster.py); the StorageClass here only ties those volumes to the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.iam_documents import efs_csi_policy
from components.raycluster_spec import RAY_GID, RAY_UID
from components.service_account_role import ServiceAccountRole, ServiceAccountRoleArgs
from components.site_storage import SiteStorage, SiteStorageArgs

CSI_ADDON = "aws-efs-csi-driver"
CSI_DRIVER = "efs.csi.aws.com"
CSI_NAMESPACE = "kube-system"
CSI_CONTROLLER_ACCOUNT = "efs-csi-controller-sa"
"""The service account the add-on's controller runs as (the one its IAM role is for)."""
STORAGE_CLASS = "spotburst-shared"
SHARED_ROOT = "/spotburst"
SHARED_ROOT_PERMISSIONS = "2775"
"""Group-writable, and new folders keep the group (setgid)."""


@dataclass
class SharedFileSystemArgs:
    cluster_name: pulumi.Input[str]
    """The EKS cluster's name, once it exists (the add-on is installed into it)."""
    vpc_id: pulumi.Input[str]
    private_subnet_ids: list[pulumi.Output[str]]
    node_security_group_id: pulumi.Input[str]
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    throughput_mode: str
    infrequent_access_after_days: int | None
    tags: dict[str, str] = field(default_factory=dict)
    nodes: list[pulumi.Resource] = field(default_factory=list)
    """What brings the cluster's nodes: the add-on is installed once they can run its pods
    (an add-on whose pods cannot start stays degraded and fails the deployment)."""


class SharedFileSystem(pulumi.ComponentResource):
    """Outputs the file system, its access point, and `volume_handle` (what a
    PersistentVolume of the EFS CSI driver names it by)."""

    file_system_id: pulumi.Output[str]
    access_point_id: pulumi.Output[str]
    volume_handle: pulumi.Output[str]
    storage_class: str
    ready: list[pulumi.Resource]
    """What a pod mounting the file system needs first (the driver, the mount targets)."""

    def __init__(
        self, name: str, args: SharedFileSystemArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotburst:storage:SharedFileSystem", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        storage = SiteStorage(
            name,
            SiteStorageArgs(
                vpc_id=args.vpc_id,
                site_cidr=None,
                subnet_ids=args.private_subnet_ids,
                client_security_group_ids=[args.node_security_group_id],
                throughput_mode=args.throughput_mode,
                infrequent_access_after_days=args.infrequent_access_after_days,
                tags=args.tags,
            ),
            opts=child,
        )
        access_point = aws.efs.AccessPoint(
            f"{name}-ray-pods",
            file_system_id=storage.file_system_id,
            posix_user=aws.efs.AccessPointPosixUserArgs(uid=RAY_UID, gid=RAY_GID),
            root_directory=aws.efs.AccessPointRootDirectoryArgs(
                path=SHARED_ROOT,
                creation_info=aws.efs.AccessPointRootDirectoryCreationInfoArgs(
                    owner_uid=RAY_UID,
                    owner_gid=RAY_GID,
                    permissions=SHARED_ROOT_PERMISSIONS,
                ),
            ),
            tags={**args.tags, "Name": f"{name}-ray-pods"},
            opts=child,
        )
        driver_role = ServiceAccountRole(
            f"{name}-efs-csi",
            ServiceAccountRoleArgs(
                oidc_provider_arn=args.oidc_provider_arn,
                oidc_issuer=args.oidc_issuer,
                namespace=CSI_NAMESPACE,
                service_account=CSI_CONTROLLER_ACCOUNT,
                policy=pulumi.Output.all(storage.file_system_arn, access_point.arn).apply(
                    lambda arns: efs_csi_policy(arns[0], arns[1])
                ),
                policy_name="efs",
                tags=args.tags,
            ),
            opts=child,
        )
        addon = aws.eks.Addon(
            f"{name}-efs-csi-driver",
            cluster_name=args.cluster_name,
            addon_name=CSI_ADDON,
            service_account_role_arn=driver_role.role_arn,
            resolve_conflicts_on_create="OVERWRITE",
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.nodes),
        )
        storage_class = k8s.storage.v1.StorageClass(
            f"{name}-storage-class",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=STORAGE_CLASS),
            provisioner=CSI_DRIVER,
            # Volumes are declared (one per RayCluster), never made on demand; kept on delete.
            reclaim_policy="Retain",
            volume_binding_mode="Immediate",
            opts=child,
        )
        self.file_system_id = storage.file_system_id
        self.access_point_id = access_point.id
        self.volume_handle = pulumi.Output.concat(storage.file_system_id, "::", access_point.id)
        self.storage_class = STORAGE_CLASS
        self.ready = [addon, storage_class, *storage.mount_targets]
        self.register_outputs(
            {"file_system_id": self.file_system_id, "volume_handle": self.volume_handle}
        )
