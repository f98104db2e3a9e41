"""The lab's network: three namespaces, the shaped site link and each site's path to S3
(the on-prem one shaped as the site link: the bucket sits at the cloud's end)."""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from collections.abc import Callable

from netem.lab.addressing import (
    S3_LINK,
    S3_NAMESPACE_ROLE,
    S3_SERVICE_IP,
    SITE_CIDR,
    SITE_LINK_INTERFACE,
    NodeSpec,
)
from netem.lab.processes import run_checked
from netem.profile import Profile
from netem.tc import AppliedShaping, shaping_commands
from vocab.burst import SITE_CLOUD, SITE_ONPREM, SITES, peer_site


def netns_supported() -> tuple[bool, str]:
    """Whether this process can build the lab, and why not when it cannot."""
    if os.geteuid() != 0:
        return False, "not root"
    missing = [tool for tool in ("ip", "tc", "mount", "taskset") if shutil.which(tool) is None]
    if missing:
        return False, f"{', '.join(missing)} not installed"
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                             check=False)
    if listing.returncode != 0:
        return False, f"`ip netns` fails: {listing.stderr.strip()}"
    return True, ""


def in_ns(namespace: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", namespace, *argv]


def create_namespace(namespace: str) -> None:
    run_checked(["ip", "netns", "add", namespace], f"creating namespace {namespace}")
    run_checked(["ip", "-n", namespace, "link", "set", "lo", "up"], f"{namespace}: lo up")


def delete_namespace(namespace: str) -> None:
    """Delete a namespace if it still exists (its veths and qdiscs go with it)."""
    if namespace in existing_namespaces():
        run_checked(["ip", "netns", "delete", namespace], f"deleting namespace {namespace}")


def existing_namespaces() -> set[str]:
    listing = run_checked(["ip", "netns", "list"], "listing namespaces")
    return {line.split()[0] for line in listing.splitlines() if line.strip()}


def namespace_pids(namespace: str) -> set[int]:
    completed = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True,
                               text=True, check=False)
    return {int(pid) for pid in completed.stdout.split()} if completed.returncode == 0 else set()


def wire(namespaces: dict[str, str], nodes: list[NodeSpec]) -> None:
    """Veth pairs, addresses and routes between the lab's namespaces (already created)."""
    onprem, cloud = namespaces[SITE_ONPREM], namespaces[SITE_CLOUD]
    s3 = namespaces[S3_NAMESPACE_ROLE]
    _veth(onprem, SITE_LINK_INTERFACE[SITE_ONPREM], cloud, SITE_LINK_INTERFACE[SITE_CLOUD])
    for node in nodes:
        _ip(namespaces[node.site], "addr", "add", f"{node.ip}/24",
            "dev", SITE_LINK_INTERFACE[node.site])
    for site in SITES:
        _ip(namespaces[site], "route", "add", SITE_CIDR[peer_site(site)],
            "dev", SITE_LINK_INTERFACE[site])
        site_if, site_ip, s3_if, s3_ip = S3_LINK[site]
        _veth(namespaces[site], site_if, s3, s3_if)
        _ip(namespaces[site], "addr", "add", f"{site_ip}/30", "dev", site_if)
        _ip(s3, "addr", "add", f"{s3_ip}/30", "dev", s3_if)
        _ip(namespaces[site], "route", "add", f"{S3_SERVICE_IP}/32", "via", s3_ip)
    _ip(s3, "addr", "add", f"{S3_SERVICE_IP}/32", "dev", "lo")


def netem_available(namespace: str) -> bool:
    """Whether the kernel has sch_netem: try it on the namespace's loopback, then remove it."""
    probe = ["tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "netem", "delay", "0ms"]
    added = subprocess.run(in_ns(namespace, probe), capture_output=True, check=False)
    if added.returncode != 0:
        return False
    run_checked(in_ns(namespace, ["tc", "qdisc", "del", "dev", "lo", "root"]),
                f"{namespace}: removing the netem probe")
    return True


SHAPING_METHOD = "tc htb+tbf on both ends of the lab's site link (kernel)"


def shape(namespaces: dict[str, str], profile: Profile, netem: bool,
          progress: Callable[[str], None]) -> AppliedShaping:
    """Apply the profile on both ends of the site link; returns what tc was given."""
    delay_applied = netem
    rates: dict[str, float] = {}
    for site in SITES:
        shaping = shaping_commands(profile, SITE_LINK_INTERFACE[site], site,
                                   SITE_CIDR[peer_site(site)], netem_available=netem)
        progress(f"shaping {site}->{peer_site(site)} at {shaping.rate_mbit:g} Mbit/s"
                 f"{'' if netem else ' (tbf only: this kernel has no netem, no delay)'}")
        for command in shaping.apply:
            run_checked(in_ns(namespaces[site], command), f"shaping {site}")
        delay_applied = delay_applied and shaping.delay_applied
        rates[f"{site}->{peer_site(site)}"] = shaping.rate_mbit
    rates.update(shape_s3_path(namespaces, profile, netem, progress))
    return AppliedShaping(SHAPING_METHOD, rates, delay_applied)


def shape_s3_path(namespaces: dict[str, str], profile: Profile, netem: bool,
                  progress: Callable[[str], None]) -> dict[str, float]:
    """The bucket sits at the cloud's end, as S3 in the cloud's region does: the on-prem
    site's path to it is shaped as the site link is (requests as on-prem -> cloud, downloads
    as cloud -> on-prem); the cloud's own path stays unshaped. Returns the rates given,
    "onprem->s3" and "s3->onprem"."""
    site_if, site_ip, s3_if, _ = S3_LINK[SITE_ONPREM]
    onprem_end = str(ipaddress.ip_network(f"{site_ip}/30", strict=False))
    ends = ((namespaces[SITE_ONPREM], site_if, SITE_ONPREM, f"{S3_SERVICE_IP}/32",
             f"{SITE_ONPREM}->{S3_NAMESPACE_ROLE}"),
            (namespaces[S3_NAMESPACE_ROLE], s3_if, SITE_CLOUD, onprem_end,
             f"{S3_NAMESPACE_ROLE}->{SITE_ONPREM}"))
    rates = {}
    for namespace, interface, as_site, peer, direction in ends:
        shaping = shaping_commands(profile, interface, as_site, peer, netem_available=netem)
        progress(f"shaping {direction} at {shaping.rate_mbit:g} Mbit/s (S3 in the cloud's "
                 "region; the cloud's path to it is not shaped)")
        for command in shaping.apply:
            run_checked(in_ns(namespace, command), f"shaping {direction}")
        rates[direction] = shaping.rate_mbit
    return rates


def _veth(ns_a: str, if_a: str, ns_b: str, if_b: str) -> None:
    run_checked(["ip", "link", "add", if_a, "netns", ns_a, "type", "veth",
                 "peer", "name", if_b, "netns", ns_b], f"veth {ns_a}:{if_a} <-> {ns_b}:{if_b}")
    _ip(ns_a, "link", "set", if_a, "up")
    _ip(ns_b, "link", "set", if_b, "up")


def _ip(namespace: str, *args: str) -> None:
    run_checked(["ip", "-n", namespace, *args], f"{namespace}: ip {' '.join(args)}")
