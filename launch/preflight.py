"""Checks before `pulumi up` that catch a deployment that would hang or surprise."""

from __future__ import annotations

from launch.stack_config import read_stack_config
from stacks.config import parse_config


def deployment_warnings(stack: str) -> list[str]:
    config = parse_config(read_stack_config(stack), stack)
    warnings = []
    if config.ray_clusters and not config.admin_cidrs:
        warnings.append(
            "spotburst:adminCidrs is empty, so the EKS API endpoint is private: `pulumi up` can "
            "only install KubeRay from inside the VPC. To deploy from this machine, allow its "
            "address: pulumi config set --path 'spotburst:adminCidrs[0]' <your-ip>/32"
        )
    return warnings
