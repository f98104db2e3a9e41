"""EC2 instance shapes from the dated table `vocab/instances.json` (vCPUs, memory, GPUs), and
what one node of a shape leaves to pods.

Read by the stack config (a pod must fit the smallest type of its node pool), the cost
estimate (always-on Ray pods packed onto a pool's nodes) and the preflight (vCPU quotas).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

INSTANCE_TABLE = Path(__file__).with_name("instances.json")
NODE_RESERVED_CPU = 0.5
"""CPUs of every node the kubelet reserve and the daemon sets take: not available to pods."""
POD_MEMORY_SHARE = 0.85
"""The share of a node's memory pods may request (the rest: kubelet reserve, eviction
threshold, daemon sets)."""


@dataclass(frozen=True)
class InstanceShape:
    vcpus: int
    memory_gib: float
    gpus: int

    @property
    def pod_cpus(self) -> float:
        """CPUs pods may request on one node of this shape."""
        return self.vcpus - NODE_RESERVED_CPU

    @property
    def pod_memory_gib(self) -> float:
        """Memory pods may request on one node of this shape."""
        return self.memory_gib * POD_MEMORY_SHARE


def load_instance_shapes(path: Path = INSTANCE_TABLE) -> dict[str, InstanceShape]:
    table: dict[str, Any] = json.loads(path.read_text())
    return {
        name: InstanceShape(int(row["vcpus"]), float(row["memory_gib"]), int(row["gpus"]))
        for name, row in table["instances"].items()
    }
