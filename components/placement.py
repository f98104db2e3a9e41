"""Where pods land on the spot cluster: node pool labels, taints and the matching tolerations.

Plain data shared by the node groups (`EksCluster`) and the Ray pod specs (`raycluster_spec`),
so a pool's taint and the toleration that admits a pod to it are written once.
"""

from __future__ import annotations

from dataclasses import dataclass

from vocab.spot import CAPACITY_ON_DEMAND, CAPACITY_SPOT, LABEL_CAPACITY

NODE_POOL_LABEL = "spotburst.io/node-pool"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
"""Selects the nodes the NVIDIA device plugin chart runs on (its default node affinity)."""
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str

    def aws(self) -> dict[str, str]:
        """As an EKS node group taint."""
        return {"key": self.key, "value": self.value, "effect": "NO_SCHEDULE"}

    def toleration(self) -> dict[str, str]:
        """The Kubernetes toleration that admits a pod to nodes with this taint."""
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": "NoSchedule"}


SPOT_TAINT = Taint("spotburst.io/spot", "true")
"""Only pods that expect preemption land on spot nodes (never the operator, CoreDNS, heads)."""
GPU_TAINT = Taint(GPU_RESOURCE, "true")
"""Only pods that ask for a GPU land on GPU nodes."""


@dataclass(frozen=True)
class PoolPlacement:
    """A node pool's identity on the cluster: its name, capacity and whether it has GPUs."""

    name: str
    spot: bool
    gpu: bool

    @property
    def capacity(self) -> str:
        return CAPACITY_SPOT if self.spot else CAPACITY_ON_DEMAND

    @property
    def node_selector(self) -> dict[str, str]:
        return {NODE_POOL_LABEL: self.name}

    @property
    def node_labels(self) -> dict[str, str]:
        labels = {**self.node_selector, LABEL_CAPACITY: self.capacity}
        if self.gpu:
            labels[GPU_PRESENT_LABEL] = "true"
        return labels

    @property
    def taints(self) -> list[Taint]:
        return [taint for taint, on in ((SPOT_TAINT, self.spot), (GPU_TAINT, self.gpu)) if on]

    @property
    def tolerations(self) -> list[dict[str, str]]:
        return [taint.toleration() for taint in self.taints]
