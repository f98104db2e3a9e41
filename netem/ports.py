"""Free TCP ports on loopback, for the lab's services and the launcher's tunnels.

A port is chosen by the caller and bound later by another process (a Ray node's agents bind
theirs seconds after it starts), so between the two it must not be handed to anyone else.
The kernel hands out ports by itself from its automatic range (a bind to port 0, and every
outgoing connection: Ray's workers and gRPC channels make hundreds), so ports are chosen
below that range, where only a process asking for that very port gets it.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

AUTOMATIC_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 20000
MIN_CHOICE = 4096
"""Fewer candidates than this below the automatic range: choose above it instead."""
ATTEMPTS = 1000


def automatic_range() -> tuple[int, int]:
    """The kernel's range for ports nobody asked for by number (Linux's default if unread)."""
    try:
        low, high = (int(part) for part in AUTOMATIC_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def chosen_range() -> range:
    low, high = automatic_range()
    if low - LOWEST_PORT >= MIN_CHOICE:
        return range(LOWEST_PORT, low)
    if 65535 - high >= MIN_CHOICE:
        return range(high + 1, 65536)
    return range(1024, 65536)


def is_free(port: int) -> bool:
    """Nothing is bound to `port` on any address (a node may bind it on any of them)."""
    with socket.socket() as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


def free_local_port() -> int:
    return free_local_ports(1)[0]


def free_local_ports(count: int, taken: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """`count` distinct free ports, none in `taken` (ports handed out meanwhile that may not
    be bound yet)."""
    candidates = chosen_range()
    chosen: list[int] = []
    for _ in range(ATTEMPTS):
        if len(chosen) == count:
            return chosen
        port = random.choice(candidates)
        if port not in taken and port not in chosen and is_free(port):
            chosen.append(port)
    if len(chosen) == count:
        return chosen
    raise OSError(f"fewer than {count} free TCP ports found in {ATTEMPTS} tries "
                  f"({min(candidates)}-{max(candidates)})")
