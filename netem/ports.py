"""A free TCP port on loopback, for the lab's services and the launcher's tunnels."""

from __future__ import annotations

import socket


def free_local_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
