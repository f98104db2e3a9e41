"""The `ray start` command line of a burst node, the same on AWS (cloud-init) and in the lab."""

from __future__ import annotations

import json

from vocab.burst import ROLE_LOGIN, TRANSFER_RESOURCE, node_labels
from vocab.ports import RayPorts


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
    if role == ROLE_LOGIN:
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
