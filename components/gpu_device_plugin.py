"""The NVIDIA device plugin (Helm chart): advertises `nvidia.com/gpu` on the GPU nodes.

The GPU pools run the EKS AL2023 NVIDIA AMI (driver and container toolkit, no device plugin).
The chart's own node affinity selects nodes labelled `nvidia.com/gpu.present=true`, which
the GPU pools carry; it tolerates their GPU and spot taints.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.helm_chart import HelmChart, release
from components.placement import GPU_TAINT, SPOT_TAINT

CHART = HelmChart(
    "https://nvidia.github.io/k8s-device-plugin", "nvidia-device-plugin", "kube-system"
)


@dataclass
class GpuDevicePluginArgs:
    chart_version: str


class GpuDevicePlugin(pulumi.ComponentResource):
    def __init__(
        self, name: str, args: GpuDevicePluginArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotburst:eks:GpuDevicePlugin", name, None, opts)
        tolerations = [
            {"key": "CriticalAddonsOnly", "operator": "Exists"},
            *(
                {"key": t.key, "operator": "Exists", "effect": "NoSchedule"}
                for t in (GPU_TAINT, SPOT_TAINT)
            ),
        ]
        release(
            name,
            CHART,
            args.chart_version,
            values={"tolerations": tolerations},
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({})
