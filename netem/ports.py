"""Free TCP ports on loopback, for the lab's services and the launcher's tunnels."""

from __future__ import annotations

import socket


def free_local_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def free_local_ports(count: int, taken: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """`count` distinct free loopback ports, none in `taken` (ports handed out meanwhile that
    may not be bound yet): the OS may hand the same free port to two probes in a row."""
    chosen: list[int] = []
    while len(chosen) < count:
        port = free_local_port()
        if port not in taken and port not in chosen:
            chosen.append(port)
    return chosen
