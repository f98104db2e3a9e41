"""Typed readers for one config object: every error names the full key and what is allowed."""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Mapping
from typing import Any

from vocab.errors import UserError

RFC1918 = tuple(
    ipaddress.ip_network(block) for block in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
)
IPV6_UNIQUE_LOCAL = ipaddress.ip_network("fc00::/7")
WORLD_WIDE_PREFIX = 8
"""A block holding more public addresses than a /8 of its family is treated as open to the
world: 0.0.0.0/0 and ::/0, and also 0.0.0.0/1, 8.0.0.0/7, ..."""
_QUANTITY = re.compile(r"^(?P<number>\d+(\.\d+)?)(?P<unit>m|Ki|Mi|Gi|Ti|k|M|G|T)?$")
_QUANTITY_UNITS = {
    "": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40,
}
GIB = 2.0**30


class ConfigError(UserError, ValueError):
    """A config value is missing or not allowed; the message names the key."""


class Fields:
    """Reads the keys of one config object, remembering its path for error messages."""

    def __init__(self, path: str, values: Any, separator: str = ".") -> None:
        if not isinstance(values, Mapping):
            raise ConfigError(f"{path}: expected an object of keys, got {values!r}")
        self.path = path
        self.values = values
        self.separator = separator

    def key(self, name: str) -> str:
        return f"{self.path}{self.separator}{name}"

    def reject_unknown(self, allowed: set[str]) -> None:
        unknown = sorted(set(self.values) - allowed)
        if unknown:
            raise ConfigError(
                f"{self.key(unknown[0])}: unknown key; allowed keys are "
                + ", ".join(sorted(allowed))
            )

    def raw(self, name: str) -> Any:
        if name not in self.values:
            raise ConfigError(f"{self.key(name)}: missing (required)")
        return self.values[name]

    def object(self, name: str) -> Fields:
        return Fields(self.key(name), self.raw(name))

    def string(self, name: str, pattern: str, allowed: str) -> str:
        value = self.raw(name)
        if not isinstance(value, str) or not re.fullmatch(pattern, value):
            raise ConfigError(f"{self.key(name)}: {value!r} is not allowed; expected {allowed}")
        return value

    def boolean(self, name: str) -> bool:
        value = self.raw(name)
        if not isinstance(value, bool):
            raise ConfigError(f"{self.key(name)}: {value!r} is not allowed; expected true or false")
        return value

    def integer(self, name: str, minimum: int, maximum: int | None = None) -> int:
        value = self.raw(name)
        in_range = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
        if in_range and maximum is not None:
            in_range = value <= maximum
        if not in_range:
            bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
            raise ConfigError(
                f"{self.key(name)}: {value!r} is not allowed; expected an integer {bound}"
            )
        return int(value)

    def number(self, name: str, minimum: float, maximum: float | None = None) -> float:
        """A finite number: nan, inf and -inf are refused (YAML's .nan and .inf, JSON's NaN
        and Infinity), as a nan compares False with every limit and would switch it off."""
        value = self.raw(name)
        allowed = (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value >= minimum
            and (maximum is None or value <= maximum)
        )
        if not allowed:
            bound = f"between {minimum:g} and {maximum:g}" if maximum is not None else (
                f">= {minimum:g}")
            raise ConfigError(
                f"{self.key(name)}: {value!r} is not allowed; expected a finite number {bound}"
            )
        return float(value)

    def quantity(self, name: str) -> str:
        """A positive Kubernetes resource quantity such as "2", "500m" or "6Gi"."""
        value = self.raw(name)
        text = (
            str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
        )
        match = _QUANTITY.fullmatch(text) if isinstance(text, str) else None
        if match is None or float(match["number"]) <= 0:
            raise ConfigError(
                f"{self.key(name)}: {value!r} is not allowed; expected a positive Kubernetes "
                "quantity such as 2, 500m, 6Gi"
            )
        return text

    def string_list(self, name: str, pattern: str, allowed: str, min_items: int) -> tuple[str, ...]:
        value = self.raw(name)
        if not isinstance(value, list) or len(value) < min_items:
            raise ConfigError(
                f"{self.key(name)}: {value!r} is not allowed; expected a list of at least "
                f"{min_items} {allowed}"
            )
        for item in value:
            if not isinstance(item, str) or not re.fullmatch(pattern, item):
                raise ConfigError(
                    f"{self.key(name)}: item {item!r} is not allowed; expected {allowed}"
                )
        if len(set(value)) != len(value):
            raise ConfigError(f"{self.key(name)}: {value!r} lists an item twice")
        return tuple(value)

    def cidr(self, name: str, private: bool) -> str:
        value = self.raw(name)
        return parse_cidr(self.key(name), value, private)


def quantity_amount(text: str) -> float:
    """What a Kubernetes quantity accepted by `Fields.quantity` stands for: cores for a CPU
    request ("500m" = 0.5), bytes for a memory request ("6Gi" = 6 * 2**30)."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    return float(match["number"]) * _QUANTITY_UNITS[match["unit"] or ""]


def parse_cidr(key: str, value: Any, private: bool) -> str:
    try:
        network = ipaddress.ip_network(value, strict=True) if isinstance(value, str) else None
    except ValueError:
        network = None
    if network is None:
        raise ConfigError(f"{key}: {value!r} is not a CIDR block such as 10.0.0.0/16")
    if private:
        if network.version != 4 or not any(network.subnet_of(block) for block in RFC1918):  # type: ignore[arg-type]
            raise ConfigError(
                f"{key}: {value} is not private; use a block inside 10.0.0.0/8, 172.16.0.0/12 "
                "or 192.168.0.0/16"
            )
        if not 16 <= network.prefixlen <= 24:
            raise ConfigError(f"{key}: {value} must have a prefix between /16 and /24")
    return str(network)


def public_addresses(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> int:
    """How many addresses of `network` are outside the private ranges (RFC 1918; IPv6 unique
    local fc00::/7). Two CIDR blocks are nested or disjoint, so subtracting the private blocks
    inside `network` counts exactly."""
    private = [block for block in (*RFC1918, IPV6_UNIQUE_LOCAL) if block.version == network.version]
    if any(network.subnet_of(block) for block in private):  # type: ignore[arg-type]
        return 0
    inside = [block for block in private if block.subnet_of(network)]  # type: ignore[arg-type]
    return network.num_addresses - sum(block.num_addresses for block in inside)


def world_wide(cidr: str) -> bool:
    """Does the block hold more public addresses than a /8 of its family (WORLD_WIDE_PREFIX)?"""
    network = ipaddress.ip_network(cidr, strict=False)
    return public_addresses(network) > 2 ** (network.max_prefixlen - WORLD_WIDE_PREFIX)


def min_desired_max(
    fields: Fields, what: str, lo: str, mid: str, hi: str, maximum: int
) -> tuple[int, int, int]:
    """Three sizes with lo <= mid <= hi, hi >= 1 and all <= maximum."""
    low = fields.integer(lo, 0, maximum)
    middle = fields.integer(mid, 0, maximum)
    high = fields.integer(hi, 1, maximum)
    if not low <= middle <= high:
        raise ConfigError(
            f"{fields.path}: {what} sizes {lo}={low}, {mid}={middle}, {hi}={high} are not "
            f"allowed; need {lo} <= {mid} <= {hi}"
        )
    return low, middle, high
