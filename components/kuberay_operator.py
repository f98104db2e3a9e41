"""The KubeRay operator (Helm chart), one per cluster, serving every experiment's RayCluster."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

CHART_REPOSITORY = "https://ray-project.github.io/kuberay-helm/"
CHART_NAME = "kuberay-operator"
OPERATOR_NAMESPACE = "kuberay-system"
OPERATOR_POD_LABELS = {"app.kubernetes.io/name": CHART_NAME}
"""Labels of the operator's pods (what a network policy admits)."""


@dataclass
class KubeRayOperatorArgs:
    chart_version: str
    node_selector: dict[str, str]


class KubeRayOperator(pulumi.ComponentResource):
    release: k8s.helm.v3.Release

    def __init__(
        self, name: str, args: KubeRayOperatorArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotburst:kuberay:KubeRayOperator", name, None, opts)
        self.release = k8s.helm.v3.Release(
            name,
            name=CHART_NAME,
            chart=CHART_NAME,
            version=args.chart_version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=CHART_REPOSITORY),
            namespace=OPERATOR_NAMESPACE,
            create_namespace=True,
            values={"nodeSelector": args.node_selector},
            atomic=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({})
