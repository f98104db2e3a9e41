"""The generated commands on a real kernel: only traffic to the peer CIDR is shaped."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Iterator

import pytest

from netem.lab.netns import create_namespace, delete_namespace, in_ns, netns_supported
from netem.lab.processes import run_checked
from netem.profile import load_profile
from netem.tc import shaping_commands

pytestmark = pytest.mark.skipif(not netns_supported()[0],
                                reason=f"needs network namespaces: {netns_supported()[1]}")
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
    probe = [sys.executable, "-m", "netem.linkprobe"]
    listening = subprocess.Popen(in_ns(receiver, [*probe, "receive", "--port", "5201"]),
                                 stdout=subprocess.PIPE, text=True)
    try:
        assert listening.stdout is not None
        assert "ready" in listening.stdout.readline()
        run_checked(in_ns(sender, [*probe, "send", "--host", host, "--port", "5201",
                                   "--seconds", "1.5"]), "sender")
        out, _ = listening.communicate(timeout=30)
        rate: float = json.loads(out.strip().splitlines()[-1])["mbit"]
        return rate
    finally:
        if listening.poll() is None:
            listening.kill()
            listening.wait()


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
