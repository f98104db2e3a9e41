"""The Cluster Autoscaler (Helm chart): grows a node pool when pods are pending, shrinks it
when its nodes are idle. Its IAM role (IRSA) resizes only this cluster's node groups."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from components.helm_chart import HelmChart, release
from components.iam_documents import cluster_autoscaler_policy
from components.service_account_role import ServiceAccountRole, ServiceAccountRoleArgs

CHART = HelmChart("https://kubernetes.github.io/autoscaler", "cluster-autoscaler", "kube-system")
SERVICE_ACCOUNT = "cluster-autoscaler"
SCALE_DOWN_AFTER = "5m"
"""An idle node is removed after this long (the chart's default is 10m)."""


@dataclass
class ClusterAutoscalerArgs:
    cluster_name: str
    region: str
    version: str
    """The autoscaler release, same minor version as the cluster (e.g. 1.34.0)."""
    chart_version: str
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    node_selector: dict[str, str]
    tags: dict[str, str] = field(default_factory=dict)


class ClusterAutoscaler(pulumi.ComponentResource):
    role_arn: pulumi.Output[str]

    def __init__(
        self, name: str, args: ClusterAutoscalerArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotburst:eks:ClusterAutoscaler", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = ServiceAccountRole(
            f"{name}-irsa",
            ServiceAccountRoleArgs(
                oidc_provider_arn=args.oidc_provider_arn,
                oidc_issuer=args.oidc_issuer,
                namespace=CHART.namespace,
                service_account=SERVICE_ACCOUNT,
                policy=cluster_autoscaler_policy(args.cluster_name),
                policy_name="node-groups",
                tags=args.tags,
            ),
            opts=child,
        )
        release(
            name,
            CHART,
            args.chart_version,
            opts=child,
            values={
                "cloudProvider": "aws",
                "awsRegion": args.region,
                "autoDiscovery": {"clusterName": args.cluster_name},
                "image": {"tag": f"v{args.version}"},
                "rbac": {
                    "serviceAccount": {
                        "create": True,
                        "name": SERVICE_ACCOUNT,
                        "annotations": {"eks.amazonaws.com/role-arn": role.role_arn},
                    }
                },
                "extraArgs": {
                    "balance-similar-node-groups": True,
                    "expander": "least-waste",
                    "skip-nodes-with-system-pods": False,
                    "scale-down-unneeded-time": SCALE_DOWN_AFTER,
                    "scale-down-delay-after-add": SCALE_DOWN_AFTER,
                },
                "nodeSelector": args.node_selector,
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": 65534,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containerSecurityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
            },
        )
        self.role_arn = role.role_arn
        self.register_outputs({"role_arn": self.role_arn})
