"""The KubeRay operator (Helm chart), one per cluster, serving every experiment's RayCluster."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.helm_chart import HelmChart, release

CHART = HelmChart(
    "https://ray-project.github.io/kuberay-helm/", "kuberay-operator", "kuberay-system"
)
OPERATOR_NAMESPACE = CHART.namespace
OPERATOR_POD_LABELS = {"app.kubernetes.io/name": CHART.name}
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
        self.release = release(
            name,
            CHART,
            args.chart_version,
            values={"nodeSelector": args.node_selector},
            opts=pulumi.ResourceOptions(parent=self),
            create_namespace=True,
        )
        self.register_outputs({})
