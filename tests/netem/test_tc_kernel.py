"""The generated commands on a real kernel: only traffic to the peer CIDR is shaped."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from netem import measure
from netem.lab.netns import create_namespace, delete_namespace, in_ns
from netem.lab.processes import run_checked
from netem.profile import load_profile
from netem.tc import shaping_commands
from tests.helpers.lab import needs_netns

pytestmark = [pytest.mark.lab, pytest.mark.subprocess, needs_netns]
PEER_IP, OTHER_IP = "198.18.1.1", "198.18.2.1"


@pytest.fixture
def pair() -> Iterator[tuple[str, str]]:
    """Two namespaces joined by a veth; the receiver has one peer-CIDR and one other address."""
    tag = secrets.token_hex(3)
    sender, receiver = f"sb-{tag}-tx", f"sb-{tag}-rx"
    try:
        for namespace in (sender, receiver):
            create_namespace(namespace)
        run_checked(["ip", "link", "add", "sb-tx", "netns", sender, "type", "veth", "peer",
                     "name", "sb-rx", "netns", receiver], "veth")
        for namespace, interface, addresses in ((sender, "sb-tx", ["198.18.0.1/24"]),
                                                (receiver, "sb-rx", [f"{PEER_IP}/24",
                                                                  f"{OTHER_IP}/24"])):
            for address in addresses:
                run_checked(["ip", "-n", namespace, "addr", "add", address, "dev", interface],
                            "address")
            run_checked(["ip", "-n", namespace, "link", "set", interface, "up"], "up")
        for prefix in ("198.18.1.0/24", "198.18.2.0/24"):
            run_checked(["ip", "-n", sender, "route", "add", prefix, "dev", "sb-tx"], "route")
        run_checked(["ip", "-n", receiver, "route", "add", "198.18.0.0/24", "dev", "sb-rx"],
                    "route")
        yield sender, receiver
    finally:
        for namespace in (sender, receiver):
            delete_namespace(namespace)


def stream_mbit(sender: str, receiver: str, host: str) -> float:
    return measure.stream_mbit(in_ns(sender, []), in_ns(receiver, []), host, seconds=1.5)


def test_only_the_peer_cidr_is_shaped_and_reset_removes_it(pair: tuple[str, str]) -> None:
    sender, receiver = pair
    shaping = shaping_commands(load_profile("30m"), "sb-tx", "onprem", "198.18.1.0/24",
                               netem_available=False)
    for command in shaping.apply:
        run_checked(in_ns(sender, command), "apply")

    to_peer = stream_mbit(sender, receiver, PEER_IP)
    to_other = stream_mbit(sender, receiver, OTHER_IP)
    assert 31 * 0.9 <= to_peer <= 31 * 1.1
    assert to_other > 5 * 31

    for command in shaping.reset:
        run_checked(in_ns(sender, command), "reset")
    assert stream_mbit(sender, receiver, PEER_IP) > 5 * 31
