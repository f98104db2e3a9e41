"""A running lab, described: JSON-ready, and able to run a command at either site."""

from __future__ import annotations

import subprocess
from dataclasses import asdict, dataclass
from typing import Any

from vocab.burst import LABEL_SITE, SITE_ONPREM


@dataclass(frozen=True)
class LabDescription:
    lab_id: str
    kind: str
    """"netns" (namespaces, tbf in the kernel) or "process" (one namespace, user-space throttle)."""
    profile: str
    profile_source: str
    target_mbit: dict[str, float]
    delay_applied: bool
    shaping: str
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
