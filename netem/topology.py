"""The burst cluster's shape, shared by the local two-site lab and the AWS burst stack.

Pure constants and functions: no Ray, no Pulumi. The AWS cloud-init and the lab both build
every node's `ray start` command line with `ray_start_args`, so the labels, the transfer
slot and the ports are the same everywhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

ONPREM = "onprem"
CLOUD = "cloud"
SITES = (ONPREM, CLOUD)

LOGIN = "login"
HPC = "hpc"
CLOUD_ROLE = "cloud"
ROLES = (LOGIN, HPC, CLOUD_ROLE)
ROLE_SITE = {LOGIN: ONPREM, HPC: ONPREM, CLOUD_ROLE: CLOUD}

LABEL_SITE = "site"
LABEL_ROLE = "role"

TRANSFER_RESOURCE = "transfer_slot"
"""One unit on every non-head node: at most one data transfer runs on a node at a time."""

GCS_PORT = 6379
DASHBOARD_PORT = 8265


@dataclass(frozen=True)
class RayPorts:
    """The fixed ports of a Ray node; gcs, dashboard and client_server are used by the head only.

    Fixed ports let a security group open exactly these between the two sites. Nodes that
    share one IP namespace (the local lab) need one RayPorts each, without overlaps.
    """

    gcs: int = GCS_PORT
    dashboard: int = DASHBOARD_PORT
    client_server: int = 10001
    object_manager: int = 8076
    node_manager: int = 8077
    dashboard_agent_grpc: int = 8078
    runtime_env_agent: int = 8079
    metrics_export: int = 8080
    dashboard_agent_http: int = 52365
    min_worker: int = 10002
    max_worker: int = 10999

    def between_nodes(self) -> list[tuple[int, int]]:
        """The (first, last) port ranges other nodes connect to: what a security group opens."""
        single = [
            self.gcs,
            self.dashboard,
            self.object_manager,
            self.node_manager,
            self.dashboard_agent_grpc,
            self.runtime_env_agent,
            self.metrics_export,
            self.dashboard_agent_http,
        ]
        return [(port, port) for port in single] + [(self.min_worker, self.max_worker)]


def peer_site(site: str) -> str:
    """The other site of the pair."""
    if site not in SITES:
        raise ValueError(f"site {site!r} is not one of {', '.join(SITES)}")
    return CLOUD if site == ONPREM else ONPREM


def site_of(role: str) -> str:
    if role not in ROLE_SITE:
        raise ValueError(f"role {role!r} is not one of {', '.join(ROLES)}")
    return ROLE_SITE[role]


def node_labels(role: str) -> dict[str, str]:
    """The Ray node labels of a node with this role."""
    return {LABEL_SITE: site_of(role), LABEL_ROLE: role}


def ray_start_args(
    role: str,
    *,
    node_ip: str,
    num_cpus: int,
    head_address: str | None = None,
    dashboard_host: str = "127.0.0.1",
    ports: RayPorts = RayPorts(),  # noqa: B008 - frozen dataclass, immutable default
    object_store_memory: int | None = None,
    temp_dir: str | None = None,
    block: bool = False,
) -> list[str]:
    """The `ray start` argument list for one node.

    role "login" starts the head (GCS on ports.gcs, dashboard on ports.dashboard bound to
    `dashboard_host`; keep 127.0.0.1 so only a tunnel reaches it). Every other role joins
    the head's GCS at `head_address` ("ip:port") and carries one TRANSFER_RESOURCE slot.
    Every node, the head too, carries the `site` and `role` labels.
    """
    if num_cpus < 0:
        raise ValueError(f"num_cpus must be >= 0, got {num_cpus}")
    labels = ",".join(f"{key}={value}" for key, value in node_labels(role).items())
    args = ["ray", "start"]
    if role == LOGIN:
        args += [
            "--head",
            f"--port={ports.gcs}",
            f"--dashboard-host={dashboard_host}",
            f"--dashboard-port={ports.dashboard}",
            f"--ray-client-server-port={ports.client_server}",
        ]
    else:
        if head_address is None:
            raise ValueError(f"a {role!r} node joins a head: head_address is required")
        args += [
            f"--address={head_address}",
            f"--resources={json.dumps({TRANSFER_RESOURCE: 1})}",
        ]
    args += [
        f"--node-ip-address={node_ip}",
        f"--num-cpus={num_cpus}",
        f"--labels={labels}",
        f"--object-manager-port={ports.object_manager}",
        f"--node-manager-port={ports.node_manager}",
        f"--dashboard-agent-grpc-port={ports.dashboard_agent_grpc}",
        f"--runtime-env-agent-port={ports.runtime_env_agent}",
        f"--metrics-export-port={ports.metrics_export}",
        f"--dashboard-agent-listen-port={ports.dashboard_agent_http}",
        f"--min-worker-port={ports.min_worker}",
        f"--max-worker-port={ports.max_worker}",
        "--disable-usage-stats",
    ]
    if object_store_memory is not None:
        args.append(f"--object-store-memory={object_store_memory}")
    if temp_dir is not None:
        args.append(f"--temp-dir={temp_dir}")
    if block:
        args.append("--block")
    return args
