"""Names, addresses and ports of one local two-site lab (pure).

All lab addresses come from 198.18.0.0/15 (benchmarking space, never routed):
  on-prem site 198.18.0.0/24: login 198.18.0.1, HPC worker 198.18.0.2
  cloud site   198.18.1.0/24: cloud nodes 198.18.1.1, 198.18.1.2, ...
  S3 service   198.19.1.1 on the s3 namespace's loopback, reached from each site over its
               own veth (198.19.0.0/30 on-prem side, 198.19.0.4/30 cloud side): S3 traffic
               never shares the on-prem <-> cloud link, but the bucket sits at the cloud's
               end, as S3 in the cloud's region does: the on-prem veth is shaped as the
               site link is, the cloud's is not (netem.lab.netns.shape_s3_path).
Interfaces are created directly inside the lab's namespaces, so their names are fixed.
"""

from __future__ import annotations

from dataclasses import dataclass

from vocab.burst import ROLE_CLOUD, ROLE_HPC, ROLE_LOGIN, SITE_CLOUD, SITE_ONPREM
from vocab.ports import RayPorts

SITE_CIDR = {SITE_ONPREM: "198.18.0.0/24", SITE_CLOUD: "198.18.1.0/24"}
SITE_LINK_INTERFACE = {SITE_ONPREM: "to-cloud", SITE_CLOUD: "to-onprem"}
S3_LINK = {
    # site: (site-side interface, site address, s3-side interface, s3 address), /30 each
    SITE_ONPREM: ("to-s3", "198.19.0.1", "to-onprem", "198.19.0.2"),
    SITE_CLOUD: ("to-s3", "198.19.0.5", "to-cloud", "198.19.0.6"),
}
S3_SERVICE_IP = "198.19.1.1"
S3_PORT = 9000
S3_NAMESPACE_ROLE = "s3"


def namespace_name(lab_id: str, part: str) -> str:
    """The network namespace of one part (onprem, cloud, s3) of lab `lab_id`."""
    return f"sb-{lab_id}-{part}"


@dataclass(frozen=True)
class NodeSpec:
    role: str
    site: str
    index: int
    """Unique within the lab: picks the node's ports and its Ray temp dir."""
    ip: str


def node_specs(cloud_nodes: int) -> list[NodeSpec]:
    """login and HPC worker on-prem, `cloud_nodes` cloud nodes: the netns lab's node IPs."""
    if cloud_nodes < 1 or cloud_nodes > 8:
        raise ValueError(f"cloud_nodes must be between 1 and 8, got {cloud_nodes}")
    nodes = [
        NodeSpec(ROLE_LOGIN, SITE_ONPREM, 0, "198.18.0.1"),
        NodeSpec(ROLE_HPC, SITE_ONPREM, 1, "198.18.0.2"),
    ]
    nodes += [
        NodeSpec(ROLE_CLOUD, SITE_CLOUD, 2 + i, f"198.18.1.{1 + i}") for i in range(cloud_nodes)
    ]
    return nodes


def lab_ports(
    index: int,
    head: RayPorts = RayPorts(),  # noqa: B008 - frozen dataclass, immutable default
    fixed_base: int = 20000,
    worker_base: int = 30000,
) -> RayPorts:
    """Ports for node `index`: disjoint from every other lab node sharing its namespace."""
    base = fixed_base + 100 * index
    workers = worker_base + 500 * index
    return RayPorts(
        gcs=head.gcs,
        dashboard=head.dashboard,
        client_server=head.client_server,
        object_manager=base,
        node_manager=base + 1,
        dashboard_agent_grpc=base + 2,
        runtime_env_agent=base + 3,
        metrics_export=base + 4,
        dashboard_agent_http=base + 5,
        min_worker=workers,
        max_worker=workers + 499,
    )
