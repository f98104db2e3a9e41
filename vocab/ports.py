"""Every port a Ray node listens on, defined once for the stacks, the labs and the launcher."""

from __future__ import annotations

from dataclasses import dataclass

GCS_PORT = 6379
DASHBOARD_PORT = 8265
"""The dashboard and the Ray Jobs API."""
CLIENT_SERVER_PORT = 10001
INFERENCE_COMMAND_PORT = 8275
"""The inference coordinator's command endpoint (HTTP, token-authenticated), on its node."""


@dataclass(frozen=True)
class RayPorts:
    """The fixed ports of a Ray node; gcs, dashboard and client_server are used by the head only.

    Fixed ports let a security group open exactly these between the two sites. Nodes that
    share one IP namespace (the local lab) need one RayPorts each, without overlaps.
    """

    gcs: int = GCS_PORT
    dashboard: int = DASHBOARD_PORT
    client_server: int = CLIENT_SERVER_PORT
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
