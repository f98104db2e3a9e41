"""The one `tc` command generator: a profile applied to one interface of one site's node.

Every node shapes its own egress toward the other site (the sender side of each direction),
so login -> cloud, HPC worker -> cloud and cloud -> on-prem are all shaped. Only packets to
the peer site's CIDR are classified into the shaped class; all other traffic passes through
HTB's direct queue untouched:

    htb root 1: (default 0: unclassified traffic is sent directly, unshaped)
     └─ class 1:1 at LINE_RATE: only a container, it never limits
         └─ [netem 10: delay rtt/2, jitter/2, loss]   only where the kernel has netem
             └─ tbf: rate = the profile's cross-site bandwidth
    u32 filter: ip dst <peer CIDR> -> 1:1

HTB (not prio) is the classifier because prio is missing from some kernels (the lab's) while
htb and tbf are everywhere. The reset is one `tc qdisc del dev IF root`; it exits non-zero
when nothing is installed, so run it best-effort before applying.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from netem.profile import Profile

LINE_RATE = "10gbit"
TBF_BURST = "1024kbit"
TBF_LATENCY = "30ms"


@dataclass(frozen=True)
class AppliedShaping:
    """What was really applied to a link, as every result records it: the tbf rate given to
    tc per direction ("onprem->cloud", "cloud->onprem") and whether delay/jitter/loss were."""

    method: str
    rate_mbit: dict[str, float]
    delay_applied: bool

    def to_dict(self) -> dict[str, object]:
        return {"method": self.method, "rate_mbit": dict(self.rate_mbit),
                "delay_applied": self.delay_applied}


@dataclass(frozen=True)
class ShapingCommands:
    apply: list[list[str]]
    reset: list[list[str]]
    rate_mbit: float
    delay_applied: bool


def shaping_commands(
    profile: Profile,
    interface: str,
    local_site: str,
    peer_cidr: str,
    *,
    netem_available: bool,
) -> ShapingCommands:
    """The commands that shape `local_site`'s traffic to `peer_cidr` leaving `interface`.

    netem_available=False (a kernel without sch_netem) shapes the rate only and reports
    delay_applied=False: the profile's rtt, jitter and loss are then not emulated.
    """
    if not interface or any(ch.isspace() for ch in interface):
        raise ValueError(f"interface {interface!r} is not a network interface name")
    try:
        peer = ipaddress.IPv4Network(peer_cidr)
    except ValueError as error:
        raise ValueError(f"peer_cidr {peer_cidr!r} is not an IPv4 CIDR: {error}") from None
    condition = profile.cross_site(local_site)
    dev = ["dev", interface]
    rate = f"{condition.bandwidth_mbit:g}mbit"
    apply = [
        ["tc", "qdisc", "add", *dev, "root", "handle", "1:", "htb", "default", "0"],
        ["tc", "class", "add", *dev, "parent", "1:", "classid", "1:1", "htb",
         "rate", LINE_RATE, "ceil", LINE_RATE],
    ]
    tbf_parent = "1:1"
    if netem_available:
        apply.append(["tc", "qdisc", "add", *dev, "parent", "1:1", "handle", "10:",
                      "netem", *_netem_args(condition.rtt_ms, condition.jitter_ms,
                                            condition.loss_percent)])
        tbf_parent = "10:1"
    apply += [
        ["tc", "qdisc", "add", *dev, "parent", tbf_parent, "handle", "20:", "tbf",
         "rate", rate, "burst", TBF_BURST, "latency", TBF_LATENCY],
        ["tc", "filter", "add", *dev, "parent", "1:", "protocol", "ip", "prio", "1",
         "u32", "match", "ip", "dst", str(peer), "flowid", "1:1"],
    ]
    return ShapingCommands(apply=apply, reset=reset_commands(interface),
                           rate_mbit=condition.bandwidth_mbit, delay_applied=netem_available)


def reset_commands(interface: str) -> list[list[str]]:
    """Remove whatever shaping `shaping_commands` installed on `interface`."""
    return [["tc", "qdisc", "del", "dev", interface, "root"]]


def _netem_args(rtt_ms: float, jitter_ms: float, loss_percent: float) -> list[str]:
    """One direction's share: half the round-trip time and half its jitter; loss as given."""
    args = ["delay", f"{rtt_ms / 2:g}ms"]
    if jitter_ms > 0:
        args.append(f"{jitter_ms / 2:g}ms")
    if loss_percent > 0:
        args += ["loss", f"{loss_percent:g}%"]
    return args
