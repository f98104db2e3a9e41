"""The tc generator's exact commands, pinned."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from netem.profile import load_profile
from netem.tc import shaping_commands


def joined(commands: list[list[str]]) -> list[str]:
    return [" ".join(command) for command in commands]


def test_rate_only_when_the_kernel_lacks_netem() -> None:
    shaping = shaping_commands(load_profile("50m"), "to-cloud", "onprem", "198.18.1.0/24",
                               netem_available=False)
    assert joined(shaping.apply) == [
        "tc qdisc add dev to-cloud root handle 1: htb default 0",
        "tc class add dev to-cloud parent 1: classid 1:1 htb rate 10gbit ceil 10gbit",
        "tc qdisc add dev to-cloud parent 1:1 handle 20: tbf rate 55mbit burst 1024kbit"
        " latency 30ms",
        "tc filter add dev to-cloud parent 1: protocol ip prio 1 u32 match ip dst"
        " 198.18.1.0/24 flowid 1:1",
    ]
    assert joined(shaping.reset) == ["tc qdisc del dev to-cloud root"]
    assert shaping.delay_applied is False
    assert shaping.rate_mbit == 55.0


def test_netem_delay_half_the_rtt_under_the_rate() -> None:
    shaping = shaping_commands(load_profile("200m"), "ens5", "cloud", "10.0.0.0/16",
                               netem_available=True)
    assert joined(shaping.apply) == [
        "tc qdisc add dev ens5 root handle 1: htb default 0",
        "tc class add dev ens5 parent 1: classid 1:1 htb rate 10gbit ceil 10gbit",
        "tc qdisc add dev ens5 parent 1:1 handle 10: netem delay 0.15ms 0.005ms",
        "tc qdisc add dev ens5 parent 10:1 handle 20: tbf rate 210mbit burst 1024kbit"
        " latency 30ms",
        "tc filter add dev ens5 parent 1: protocol ip prio 1 u32 match ip dst"
        " 10.0.0.0/16 flowid 1:1",
    ]
    assert shaping.delay_applied is True


def test_loss_is_applied_when_the_profile_has_it(profile_file: Callable[..., Path]) -> None:
    path = profile_file(bandwidth=40, rtt=10, jitter=0, loss=1.5)
    shaping = shaping_commands(load_profile(str(path)), "eth0", "onprem", "10.1.0.0/16",
                               netem_available=True)
    assert " ".join(shaping.apply[2]).endswith("handle 10: netem delay 5ms loss 1.5%")


@pytest.mark.parametrize("site, rate", [("onprem", "83mbit"), ("cloud", "83mbit")])
def test_both_sites_shape_their_own_direction(site: str, rate: str) -> None:
    shaping = shaping_commands(load_profile("80m"), "ens5", site, "10.9.0.0/16",
                               netem_available=False)
    assert rate in shaping.apply[2]


@pytest.mark.parametrize(
    "interface, site, cidr, message",
    [
        ("", "onprem", "10.1.0.0/16", "interface"),
        ("eth 0", "onprem", "10.1.0.0/16", "interface"),
        ("eth0", "onprem", "10.1.0.0/33", "peer_cidr"),
        ("eth0", "onprem", "10.1.0.1/16", "peer_cidr"),
        ("eth0", "mars", "10.1.0.0/16", "site"),
    ],
)
def test_bad_arguments_are_named(interface: str, site: str, cidr: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        shaping_commands(load_profile("30m"), interface, site, cidr, netem_available=False)
