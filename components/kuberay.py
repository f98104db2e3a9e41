"""The KubeRay operator (Helm chart) and one RayCluster that depends on it."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.raycluster_spec import RayClusterSpecArgs, head_service_name, raycluster_spec

CHART_REPOSITORY = "https://ray-project.github.io/kuberay-helm/"
CHART_NAME = "kuberay-operator"
OPERATOR_NAMESPACE = "kuberay-system"


@dataclass
class KubeRayArgs:
    kubeconfig: pulumi.Input[str]
    chart_version: str
    namespace: str
    cluster_name: str
    service_account_role_arn: pulumi.Input[str]
    spec: RayClusterSpecArgs


class KubeRay(pulumi.ComponentResource):
    namespace: str
    raycluster_name: str
    head_service: str

    def __init__(self, name: str, args: KubeRayArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotburst:kuberay:KubeRay", name, None, opts)
        provider = k8s.Provider(
            f"{name}-k8s", kubeconfig=args.kubeconfig, opts=pulumi.ResourceOptions(parent=self)
        )
        in_cluster = pulumi.ResourceOptions(parent=self, provider=provider)
        operator = k8s.helm.v3.Release(
            f"{name}-operator",
            name=CHART_NAME,
            chart=CHART_NAME,
            version=args.chart_version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=CHART_REPOSITORY),
            namespace=OPERATOR_NAMESPACE,
            create_namespace=True,
            atomic=True,
            opts=in_cluster,
        )
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=args.namespace),
            opts=in_cluster,
        )
        service_account = k8s.core.v1.ServiceAccount(
            f"{name}-service-account",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=args.spec.service_account,
                namespace=namespace.metadata.name,
                annotations={"eks.amazonaws.com/role-arn": args.service_account_role_arn},
            ),
            opts=in_cluster,
        )
        k8s.apiextensions.CustomResource(
            f"{name}-raycluster",
            api_version="ray.io/v1",
            kind="RayCluster",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=args.cluster_name, namespace=namespace.metadata.name
            ),
            spec=raycluster_spec(args.spec),
            opts=pulumi.ResourceOptions(
                parent=self, provider=provider, depends_on=[operator, service_account]
            ),
        )
        self.namespace = args.namespace
        self.raycluster_name = args.cluster_name
        self.head_service = head_service_name(args.cluster_name)
        self.register_outputs(
            {
                "namespace": self.namespace,
                "raycluster_name": self.raycluster_name,
                "head_service": self.head_service,
            }
        )
