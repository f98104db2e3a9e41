"""The typed config readers by hand: finite numbers, quantities, how much of the internet a
CIDR block opens."""

from __future__ import annotations

import ipaddress

import pytest

from stacks.fields import ConfigError, Fields, public_addresses, quantity_amount, world_wide


@pytest.mark.parametrize(
    ("cidr", "public", "wide"),
    [
        ("0.0.0.0/0", 2**32 - 2**24 - 2**20 - 2**16, True),  # less the three RFC 1918 blocks
        ("0.0.0.0/1", 2**31 - 2**24, True),  # holds 10/8
        ("128.0.0.0/1", 2**31 - 2**20 - 2**16, True),  # holds 172.16/12 and 192.168/16
        ("8.0.0.0/7", 2**25, True),  # two public /8s
        ("8.0.0.0/8", 2**24, False),  # one: not wider than a /8
        ("10.0.0.0/7", 2**24, False),  # private 10/8 + public 11/8
        ("10.0.0.0/8", 0, False),
        ("10.1.0.0/16", 0, False),  # inside a private block
        ("198.51.100.7/32", 1, False),
        ("::/0", 2**128 - 2**121, True),  # less fc00::/7
        ("2000::/3", 2**125, True),
        ("2001:db8::/32", 2**96, False),
        ("fc00::/7", 0, False),
    ],
)
def test_public_addresses_and_world_wide_by_hand(cidr: str, public: int, wide: bool) -> None:
    assert public_addresses(ipaddress.ip_network(cidr)) == public
    assert world_wide(cidr) is wide


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), True, "3", None])
def test_a_number_is_finite_and_a_number(value: object) -> None:
    with pytest.raises(ConfigError) as error:
        Fields("spotburst", {"x": value}, separator=":").number("x", 0.0)
    assert str(error.value) == (
        f"spotburst:x: {value!r} is not allowed; expected a finite number >= 0")


def test_a_number_between_its_bounds_inclusive() -> None:
    fields = Fields("s", {"low": 0, "high": 2.5, "over": 2.5000001, "under": -0.1})
    assert (fields.number("low", 0.0, 2.5), fields.number("high", 0.0, 2.5)) == (0.0, 2.5)
    for name in ("over", "under"):
        with pytest.raises(ConfigError, match=f"^s.{name}: .* expected a finite number between "
                                              r"0 and 2\.5$"):
            fields.number(name, 0.0, 2.5)


@pytest.mark.parametrize(
    ("text", "amount"),
    [("2", 2.0), ("500m", 0.5), ("3.5", 3.5), ("6Gi", 6 * 2.0**30), ("512Mi", 2.0**29),
     ("1k", 1000.0), ("2G", 2e9), ("1Ti", 2.0**40)],
)
def test_quantity_amounts_by_hand(text: str, amount: float) -> None:
    assert quantity_amount(text) == amount


def test_a_quantity_the_reader_refuses_has_no_amount() -> None:
    for text in ("nan", "inf", "1e3", "-1", "5 Gi"):
        with pytest.raises(ValueError):
            quantity_amount(text)
        with pytest.raises(ConfigError, match="positive Kubernetes quantity"):
            Fields("s", {"cpu": text}).quantity("cpu")
