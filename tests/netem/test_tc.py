"""The tc generator's exact commands, pinned."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from netem.profile import Profile, load_profile
from netem.tc import AppliedShaping, reset_commands, shaping_commands
from tests.helpers.asymmetric import asymmetric_document


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


@pytest.fixture
def asymmetric(
    seed_document: Callable[[], dict[str, Any]], document_file: Callable[[Any], Path]
) -> Profile:
    return load_profile(str(document_file(asymmetric_document(seed_document()))))


def test_each_site_shapes_with_its_own_direction_of_an_asymmetric_profile(
    asymmetric: Profile,
) -> None:
    onprem = shaping_commands(asymmetric, "eth0", "onprem", "10.1.0.0/16", netem_available=True)
    cloud = shaping_commands(asymmetric, "ens5", "cloud", "10.0.0.0/16", netem_available=True)
    # on-prem -> cloud: rtt 10 ms, jitter 2 ms, loss 1.5 %, 20 Mbit/s; back: 40, 4, 0.5 %, 80
    assert joined(onprem.apply)[2:4] == [
        "tc qdisc add dev eth0 parent 1:1 handle 10: netem delay 5ms 1ms loss 1.5%",
        "tc qdisc add dev eth0 parent 10:1 handle 20: tbf rate 20mbit burst 1024kbit"
        " latency 30ms",
    ]
    assert joined(cloud.apply)[2:4] == [
        "tc qdisc add dev ens5 parent 1:1 handle 10: netem delay 20ms 2ms loss 0.5%",
        "tc qdisc add dev ens5 parent 10:1 handle 20: tbf rate 80mbit burst 1024kbit"
        " latency 30ms",
    ]
    assert (onprem.rate_mbit, cloud.rate_mbit) == (20.0, 80.0)


def test_apply_only_adds_and_reset_only_deletes(asymmetric: Profile) -> None:
    shaping = shaping_commands(asymmetric, "eth0", "onprem", "10.1.0.0/16", netem_available=True)
    assert [command[:3] for command in shaping.apply] == [
        ["tc", "qdisc", "add"], ["tc", "class", "add"], ["tc", "qdisc", "add"],
        ["tc", "qdisc", "add"], ["tc", "filter", "add"]]
    reset = [["tc", "qdisc", "del", "dev", "eth0", "root"]]
    assert shaping.reset == reset_commands("eth0") == reset


def test_no_jitter_no_loss_only_the_delay(profile_file: Callable[..., Path]) -> None:
    shaping = shaping_commands(load_profile(str(profile_file(rtt=0.5, jitter=0, loss=0))),
                               "eth0", "onprem", "10.1.0.0/16", netem_available=True)
    assert " ".join(shaping.apply[2]).endswith("netem delay 0.25ms")


def test_the_applied_shaping_is_recorded_as_given_and_as_a_copy() -> None:
    rates = {"onprem->cloud": 31.0, "cloud->onprem": 12.5}
    applied = AppliedShaping(method="htb+tbf", rate_mbit=rates, delay_applied=False)
    record = applied.to_dict()
    assert record == {
        "method": "htb+tbf",
        "rate_mbit": {"onprem->cloud": 31.0, "cloud->onprem": 12.5},
        "delay_applied": False,
    }
    record["rate_mbit"]["onprem->cloud"] = 0.0  # type: ignore[index]
    assert applied.rate_mbit["onprem->cloud"] == 31.0  # the record does not alias the rates
