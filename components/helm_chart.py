"""One Helm chart release, pinned to a version from a named repository (Helm runs in Pulumi)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s


@dataclass(frozen=True)
class HelmChart:
    repository: str
    name: str
    namespace: str


def release(
    resource_name: str,
    chart: HelmChart,
    version: str,
    values: dict[str, Any],
    opts: pulumi.ResourceOptions,
    create_namespace: bool = False,
) -> k8s.helm.v3.Release:
    """Install `chart` at `version`; `atomic`: a failed install is rolled back, not left."""
    return k8s.helm.v3.Release(
        resource_name,
        name=chart.name,
        chart=chart.name,
        version=version,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository),
        namespace=chart.namespace,
        create_namespace=create_namespace,
        values=values,
        atomic=True,
        opts=opts,
    )
