"""One experiment's Ray cluster on the spot cluster: its namespace, service account (IRSA),
a network policy around its pods, the notice agent's files for its spot pods (a ConfigMap),
its claim on the stack's shared file system (a PersistentVolume bound to one
PersistentVolumeClaim in its namespace), and the `ray.io/v1` RayCluster itself."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.kuberay_operator import OPERATOR_NAMESPACE, OPERATOR_POD_LABELS
from components.raycluster_spec import (
    GCS_PASSWORD_KEY,
    HEAD_PORTS,
    RayClusterSpecArgs,
    head_service_name,
    notice_agent_config_map_name,
    notice_agent_file_key,
    raycluster_spec,
    shared_claim_name,
    token_secret_name,
)
from components.shared_file_system import CSI_DRIVER

SHARED_CAPACITY = "1Ti"
"""What the shared volume and its claim state; EFS grows with its data and ignores it."""
READ_WRITE_MANY = "ReadWriteMany"


@dataclass
class SharedVolumeArgs:
    """The stack's shared file system, as the EFS CSI driver names it."""

    volume_handle: pulumi.Input[str]
    storage_class: str
    ready: list[pulumi.Resource] = field(default_factory=list)
    """What must exist before a pod mounts it (the driver, the mount targets)."""

CLUSTER_LABEL = "ray.io/cluster"
"""KubeRay's label on every pod of a RayCluster."""


@dataclass
class RayClusterArgs:
    namespace: str
    cluster_name: str
    service_account_role_arn: pulumi.Input[str]
    spec: RayClusterSpecArgs
    operator: pulumi.Resource
    """The KubeRay operator release: the RayCluster waits for its CRD."""
    gcs_redis_password: pulumi.Input[str] | None = None
    """With `spec.gcs_fault_tolerance`: the Redis password, put in the Secret it names."""
    notice_agent_files: dict[str, str] | None = None
    """The notice agent's files (repository path -> text), needed when a worker group is on
    a spot pool."""
    shared_volume: SharedVolumeArgs | None = None
    """Mounted in every pod of the cluster (sets `spec.shared_claim`)."""


class RayCluster(pulumi.ComponentResource):
    namespace: str
    raycluster_name: str
    head_service: str
    token_secret: str

    def __init__(self, name: str, args: RayClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotburst:kuberay:RayCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=args.namespace),
            opts=child,
        )
        service_account = k8s.core.v1.ServiceAccount(
            f"{name}-service-account",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=args.spec.service_account,
                namespace=namespace.metadata.name,
                annotations={"eks.amazonaws.com/role-arn": args.service_account_role_arn},
            ),
            automount_service_account_token=False,
            opts=child,
        )
        own_pods = {CLUSTER_LABEL: args.cluster_name}
        k8s.networking.v1.NetworkPolicy(
            f"{name}-ingress",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=f"{args.cluster_name}-ingress", namespace=namespace.metadata.name
            ),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=own_pods),
                policy_types=["Ingress"],
                ingress=[
                    # Ray's nodes talk to each other on many ports.
                    k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                        from_=[
                            k8s.networking.v1.NetworkPolicyPeerArgs(
                                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=own_pods)
                            )
                        ]
                    ),
                    # The operator reaches the head's ports; nothing else gets in.
                    k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                        from_=[
                            k8s.networking.v1.NetworkPolicyPeerArgs(
                                namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                                    match_labels={"kubernetes.io/metadata.name": OPERATOR_NAMESPACE}
                                ),
                                pod_selector=k8s.meta.v1.LabelSelectorArgs(
                                    match_labels=OPERATOR_POD_LABELS
                                ),
                            )
                        ],
                        ports=[
                            k8s.networking.v1.NetworkPolicyPortArgs(protocol="TCP", port=port)
                            for port in HEAD_PORTS.values()
                        ],
                    ),
                ],
            ),
            opts=child,
        )
        needs: list[pulumi.Resource] = [args.operator, service_account]
        if any(group.placement.spot for group in args.spec.worker_groups):
            if not args.notice_agent_files:
                raise ValueError(f"{name}: spot worker groups need the notice agent's files")
            needs.append(
                k8s.core.v1.ConfigMap(
                    f"{name}-notice-agent",
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        name=notice_agent_config_map_name(args.cluster_name),
                        namespace=namespace.metadata.name,
                    ),
                    data={notice_agent_file_key(path): text
                          for path, text in args.notice_agent_files.items()},
                    opts=child,
                )
            )
        gcs = args.spec.gcs_fault_tolerance
        if gcs is not None:
            if args.gcs_redis_password is None:
                raise ValueError(f"{name}: GCS fault tolerance needs the Redis password")
            needs.append(
                k8s.core.v1.Secret(
                    f"{name}-gcs-redis",
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        name=gcs.password_secret, namespace=namespace.metadata.name
                    ),
                    type="Opaque",
                    string_data={GCS_PASSWORD_KEY: args.gcs_redis_password},
                    opts=child,
                )
            )
        if args.shared_volume is not None:
            claim = self._claim_shared(name, args, namespace, args.shared_volume)
            args.spec.shared_claim = shared_claim_name(args.cluster_name)
            needs.extend([claim, *args.shared_volume.ready])
        k8s.apiextensions.CustomResource(
            f"{name}-raycluster",
            api_version="ray.io/v1",
            kind="RayCluster",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=args.cluster_name, namespace=namespace.metadata.name
            ),
            spec=raycluster_spec(args.spec),
            opts=pulumi.ResourceOptions(parent=self, depends_on=needs),
        )
        self.namespace = args.namespace
        self.raycluster_name = args.cluster_name
        self.head_service = head_service_name(args.cluster_name)
        self.token_secret = token_secret_name(args.cluster_name)
        self.register_outputs(
            {
                "namespace": self.namespace,
                "raycluster_name": self.raycluster_name,
                "head_service": self.head_service,
                "token_secret": self.token_secret,
            }
        )

    def _claim_shared(
        self,
        name: str,
        args: RayClusterArgs,
        namespace: k8s.core.v1.Namespace,
        shared: SharedVolumeArgs,
    ) -> k8s.core.v1.PersistentVolumeClaim:
        """A volume (cluster-wide, one per claim) reserved for this namespace's one claim."""
        claim_name = shared_claim_name(args.cluster_name)
        volume_name = f"{args.namespace}-{claim_name}"
        child = pulumi.ResourceOptions(parent=self)
        volume = k8s.core.v1.PersistentVolume(
            f"{name}-shared-volume",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=volume_name),
            spec=k8s.core.v1.PersistentVolumeSpecArgs(
                capacity={"storage": SHARED_CAPACITY},
                access_modes=[READ_WRITE_MANY],
                persistent_volume_reclaim_policy="Retain",
                storage_class_name=shared.storage_class,
                claim_ref=k8s.core.v1.ObjectReferenceArgs(
                    namespace=args.namespace, name=claim_name
                ),
                csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
                    driver=CSI_DRIVER, volume_handle=shared.volume_handle
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=shared.ready),
        )
        return k8s.core.v1.PersistentVolumeClaim(
            f"{name}-shared-claim",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=claim_name, namespace=namespace.metadata.name),
            spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                access_modes=[READ_WRITE_MANY],
                storage_class_name=shared.storage_class,
                volume_name=volume.metadata.name,
                resources=k8s.core.v1.VolumeResourceRequirementsArgs(
                    requests={"storage": SHARED_CAPACITY}
                ),
            ),
            opts=child,
        )
