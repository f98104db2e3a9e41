"""Bandwidth profiles in networkx's node-link JSON format (the burst paper's), loaded and
validated (the format: docs/labs.md, "The profile file").

A profile names three nodes (Cloud, HPCLogin, HPCWorker) and gives every directed link a
`condition` {rtt, bandwidth, jitter, loss}, each a [mean, std] pair (ms, Mbit/s, ms, %).
Shaping acts per site pair, so all links from one site to the other must share one
condition; `Profile.cross_site(site)` returns it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from vocab.burst import SITE_CLOUD, SITE_ONPREM, peer_site
from vocab.errors import UserError
from workloads.common.input_files import MB, InputFileError, read_input_json

NODE_SITE = {"Cloud": SITE_CLOUD, "HPCLogin": SITE_ONPREM, "HPCWorker": SITE_ONPREM}
CONDITION_KEYS = ("rtt", "bandwidth", "jitter", "loss")
SEED_RATES = {"30m": 31.0, "50m": 55.0, "80m": 83.0, "100m": 106.0, "150m": 160.0, "200m": 210.0}
"""Named profile -> the cross-site rate (Mbit/s) the burst paper's setup actually set."""
SEED_RTT_MS = 0.3
SEED_JITTER_MS = 0.01
INTRA_ONPREM_MBIT = 900.0
INTRA_CLOUD_MBIT = 5000.0
MIN_BW_MBIT = 0.1
MAX_BW_MBIT = 10_000.0
"""The slowest and fastest link a lab's or a stack's tc shaping is asked for."""
MAX_DELAY_MS = 10_000.0
"""The longest round trip or jitter a profile may ask for."""


MAX_PROFILE_BYTES = 4 * MB
"""A profile is a few kB."""


class ProfileError(UserError, ValueError):
    """A profile could not be resolved or is malformed; the message names what is wrong."""


@dataclass(frozen=True)
class Condition:
    rtt_ms: float
    rtt_std_ms: float
    bandwidth_mbit: float
    bandwidth_std_mbit: float
    jitter_ms: float
    jitter_std_ms: float
    loss_percent: float
    loss_std_percent: float


@dataclass(frozen=True)
class Profile:
    name: str
    source: str
    links: dict[tuple[str, str], Condition]

    def cross_site(self, from_site: str) -> Condition:
        """The one condition of every link from `from_site` to the other site."""
        to_site = peer_site(from_site)
        for (source, target), condition in self.links.items():
            if NODE_SITE[source] == from_site and NODE_SITE[target] == to_site:
                return condition
        raise ProfileError(f"{self.source}: no link from site {from_site} to site {to_site}")

    def target_mbit(self) -> dict[str, float]:
        return {
            f"{SITE_ONPREM}->{SITE_CLOUD}": self.cross_site(SITE_ONPREM).bandwidth_mbit,
            f"{SITE_CLOUD}->{SITE_ONPREM}": self.cross_site(SITE_CLOUD).bandwidth_mbit,
        }


def accepted_forms() -> str:
    names = ", ".join(SEED_RATES)
    return (
        f"a profile name ({names}), a bandwidth in Mbit/s (--bw N: 30/50/80/100/150/200 pick "
        "the shipped profile, any other positive number makes one with that rate), or a path "
        "to a profile JSON file (node-link format: docs/labs.md)"
    )


def load_profile(profile: str | None = None, bw: float | str | None = None) -> Profile:
    """Resolve exactly one of a profile name / file path, or a bandwidth, into a Profile."""
    if (profile is None) == (bw is None):
        raise ProfileError(f"give exactly one of a profile or a bandwidth; accepted: "
                           f"{accepted_forms()}")
    if bw is not None:
        return profile_for_bandwidth(bw)
    assert profile is not None
    if profile in SEED_RATES:
        text = resources.files("netem.profiles").joinpath(f"{profile}.json").read_text()
        return parse_profile(json.loads(text), name=profile, source=f"builtin:{profile}")
    path = Path(profile)
    if path.suffix == ".json" or path.exists():
        return load_profile_file(path)
    raise ProfileError(f"unknown profile {profile!r}; accepted: {accepted_forms()}")


def profile_for_bandwidth(bw: float | str) -> Profile:
    try:
        rate = float(bw)
    except ValueError:
        raise ProfileError(
            f"bandwidth {bw!r} is not a number; accepted: {accepted_forms()}"
        ) from None
    if not math.isfinite(rate) or not MIN_BW_MBIT <= rate <= MAX_BW_MBIT:
        raise ProfileError(f"bandwidth {bw!r} must be {MIN_BW_MBIT:g}-{MAX_BW_MBIT:g} "
                           f"Mbit/s; accepted: {accepted_forms()}")
    name = f"{rate:g}m"
    if name in SEED_RATES:
        return load_profile(name)
    return synthesized_profile(rate)


def synthesized_profile(rate_mbit: float) -> Profile:
    """A profile like the shipped ones, with `rate_mbit` across the sites."""
    def condition(bandwidth: float) -> Condition:
        return Condition(SEED_RTT_MS, 0.0, bandwidth, 0.0, SEED_JITTER_MS, 0.0, 0.0, 0.0)

    cross = condition(rate_mbit)
    links = {
        ("Cloud", "HPCLogin"): cross,
        ("Cloud", "HPCWorker"): cross,
        ("HPCLogin", "Cloud"): cross,
        ("HPCWorker", "Cloud"): cross,
        ("HPCLogin", "HPCWorker"): condition(INTRA_ONPREM_MBIT),
        ("HPCWorker", "HPCLogin"): condition(INTRA_ONPREM_MBIT),
        ("HPCWorker", "HPCWorker"): condition(INTRA_ONPREM_MBIT),
        ("Cloud", "Cloud"): condition(INTRA_CLOUD_MBIT),
    }
    return Profile(name=f"bw-{rate_mbit:g}m", source=f"bandwidth:{rate_mbit:g}", links=links)


def load_profile_file(path: Path) -> Profile:
    try:
        document = read_input_json("--profile", path, max_bytes=MAX_PROFILE_BYTES)
    except InputFileError as error:
        raise ProfileError(f"{error}; accepted: {accepted_forms()}") from None
    return parse_profile(document, name=path.stem, source=str(path))


def parse_profile(document: Any, *, name: str, source: str) -> Profile:
    """Validate a node-link document; every error names the offending field."""
    if not isinstance(document, dict):
        raise ProfileError(f"{source}: the top level must be a JSON object with nodes and links")
    node_ids = _node_ids(document.get("nodes"), source)
    missing = sorted(set(NODE_SITE) - node_ids)
    if missing:
        raise ProfileError(f"{source}: nodes: missing {', '.join(missing)} "
                           f"(a profile names {', '.join(NODE_SITE)})")
    raw_links = document.get("links")
    if not isinstance(raw_links, list) or not raw_links:
        raise ProfileError(f"{source}: links: must be a non-empty list of "
                           "{source, target, condition}")
    links: dict[tuple[str, str], Condition] = {}
    for index, link in enumerate(raw_links):
        field = f"links[{index}]"
        if not isinstance(link, dict):
            raise ProfileError(f"{source}: {field}: must be an object")
        ends = []
        for end in ("source", "target"):
            node = link.get(end)
            if node not in NODE_SITE:
                raise ProfileError(f"{source}: {field}.{end}: {node!r} is not one of "
                                   f"{', '.join(NODE_SITE)}")
            ends.append(node)
        links[(ends[0], ends[1])] = _condition(link.get("condition"), f"{field}.condition",
                                               source)
    profile = Profile(name=name, source=source, links=links)
    for site in (SITE_ONPREM, SITE_CLOUD):
        _check_one_cross_site_condition(profile, site, raw_links)
    return profile


def _node_ids(nodes: Any, source: str) -> set[str]:
    if not isinstance(nodes, list):
        raise ProfileError(f"{source}: nodes: must be a list of {{\"id\": name}}")
    ids = set()
    for index, node in enumerate(nodes):
        if not isinstance(node, dict) or node.get("id") not in NODE_SITE:
            raise ProfileError(f"{source}: nodes[{index}].id: must be one of "
                               f"{', '.join(NODE_SITE)}")
        ids.add(node["id"])
    return ids


def _condition(raw: Any, field: str, source: str) -> Condition:
    if not isinstance(raw, dict):
        raise ProfileError(f"{source}: {field}: must be an object with "
                           f"{', '.join(CONDITION_KEYS)}")
    values: list[float] = []
    for key in CONDITION_KEYS:
        pair = raw.get(key)
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in pair)
            or not all(math.isfinite(v) and v >= 0 for v in pair)
        ):
            raise ProfileError(f"{source}: {field}.{key}: must be [mean, std] of two "
                               f"non-negative numbers, got {pair!r}")
        values += [float(pair[0]), float(pair[1])]
    condition = Condition(*values)
    if not MIN_BW_MBIT <= condition.bandwidth_mbit <= MAX_BW_MBIT:
        raise ProfileError(f"{source}: {field}.bandwidth: the mean must be "
                           f"{MIN_BW_MBIT:g}-{MAX_BW_MBIT:g} Mbit/s, got "
                           f"{condition.bandwidth_mbit:g}")
    if condition.bandwidth_std_mbit > MAX_BW_MBIT:
        raise ProfileError(f"{source}: {field}.bandwidth: the std must be at most "
                           f"{MAX_BW_MBIT:g} Mbit/s")
    delays = (condition.rtt_ms, condition.rtt_std_ms, condition.jitter_ms,
              condition.jitter_std_ms)
    if max(delays) > MAX_DELAY_MS:
        raise ProfileError(f"{source}: {field}: rtt and jitter must be at most "
                           f"{MAX_DELAY_MS:g} ms")
    if condition.loss_percent > 100:
        raise ProfileError(f"{source}: {field}.loss: the mean is a percentage, at most 100")
    return condition


def _check_one_cross_site_condition(profile: Profile, site: str, raw_links: list[Any]) -> None:
    to_site = peer_site(site)
    found = [
        (index, (link["source"], link["target"]))
        for index, link in enumerate(raw_links)
        if NODE_SITE[link["source"]] == site and NODE_SITE[link["target"]] == to_site
    ]
    if not found:
        raise ProfileError(f"{profile.source}: links: no link from a {site} node "
                           f"to a {to_site} node")
    first_index, first_key = found[0]
    for index, key in found[1:]:
        if profile.links[key] != profile.links[first_key]:
            raise ProfileError(
                f"{profile.source}: links[{index}].condition: {key[0]}->{key[1]} differs from "
                f"links[{first_index}] {first_key[0]}->{first_key[1]}; shaping is per site "
                f"pair, so every {site}->{to_site} link must have the same condition"
            )
