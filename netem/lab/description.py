"""A running lab, described: JSON-ready, and able to run a command at either site."""

from __future__ import annotations

import subprocess
from dataclasses import asdict, dataclass, field
from typing import Any

from vocab.burst import LABEL_SITE, SITE_ONPREM


@dataclass(frozen=True)
class LabDescription:
    lab_id: str
    kind: str
    """Always "netns": network namespaces, the site link shaped by tc in the kernel."""
    profile: str
    profile_source: str
    shaping: dict[str, Any]
    """What tc was given (netem.tc.AppliedShaping.to_dict()): method, rate_mbit per
    direction, delay_applied. Results record this, never the profile's wish."""
    notes: list[str]
    ray_address: str
    """GCS address for `ray.init(address=...)`; reachable from the on-prem site (`command`)."""
    dashboard_url: str
    env: dict[str, str]
    """Variables a Ray client needs (token auth), already part of every `command` prefix."""
    storage: dict[str, str]
    s3_endpoint_url: str
    s3_credentials: dict[str, str]
    site_prefixes: dict[str, list[str]]
    site_cidrs: dict[str, str]
    nodes: list[dict[str, Any]]
    temp_dir: str
    state_file: str
    namespaces: dict[str, str] = field(default_factory=dict)
    """The network namespace of each part: onprem, cloud, s3."""
    cpus: dict[str, Any] = field(default_factory=dict)
    """The CPU split (netem.lab.cpus.CpuSplit.to_dict()): each site's CPUs, the S3 service's."""

    @property
    def rate_mbit(self) -> dict[str, float]:
        """The tbf rate applied per direction ("onprem->cloud", "cloud->onprem", and the
        on-prem site's path to S3: "onprem->s3", "s3->onprem")."""
        return dict(self.shaping["rate_mbit"])

    @property
    def delay_applied(self) -> bool:
        return bool(self.shaping["delay_applied"])

    def command(self, argv: list[str], site: str = SITE_ONPREM) -> list[str]:
        """`argv` made to run at `site` (the workload driver runs on-prem, like the login)."""
        if site not in self.site_prefixes:
            raise ValueError(f"site {site!r} is not one of {', '.join(self.site_prefixes)}")
        return [*self.site_prefixes[site], *argv]

    def node_ip(self, site: str) -> str:
        """The address of the first Ray node at `site` (the login node on-prem)."""
        for node in self.nodes:
            if node["labels"].get(LABEL_SITE) == site:
                return str(node["ip"])
        raise ValueError(f"the lab has no node at site {site!r}")

    def run(self, argv: list[str], site: str = SITE_ONPREM,
            **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        """Run `argv` at `site` to completion (kwargs go to subprocess.run)."""
        return subprocess.run(self.command(argv, site), **kwargs)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabDescription:
        return cls(**data)
