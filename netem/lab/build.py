"""Building a lab: namespaces, the shaped site link, per-site storage hiding and CPUs, then
its services: moto_server and one Ray node per role."""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from netem.lab import netns
from netem.lab.addressing import (
    S3_NAMESPACE_ROLE,
    S3_PORT,
    S3_SERVICE_IP,
    SITE_CIDR,
    NodeSpec,
    lab_ports,
    namespace_name,
)
from netem.lab.cpus import cpu_list, split_cpus
from netem.lab.description import LabDescription
from netem.lab.processes import MARKER_ENV
from netem.lab.services import moto_argv, probe, ray_node_argv, start_process
from netem.lab.sites import site_prefix
from netem.lab.state import LabState, lab_temp_dir
from netem.profile import Profile
from vocab.burst import ROLE_LOGIN, SITE_CLOUD, SITE_ONPREM, SITES, peer_site
from vocab.errors import UserError

Progress = Callable[[str], None]
LAB_KIND = "netns"
S3_CREDENTIALS = {"aws_access_key_id": "lab", "aws_secret_access_key": "lab",
                  "region_name": "us-east-1"}


def _new_temp_dir(state: LabState) -> Path:
    """The lab's directory, recorded before it is made (an interrupt cannot orphan it)."""
    temp_dir = lab_temp_dir(state.lab_id)
    state.temp_dir = str(temp_dir)
    state.save()
    try:
        temp_dir.mkdir(mode=0o700)
    except FileExistsError:
        state.temp_dir = ""  # not ours: never remove it
        state.save()
        raise
    for sub in ("logs", "storage/onprem", "storage/cloud"):
        (temp_dir / sub).mkdir(parents=True)
    token_path = temp_dir / "ray_auth_token"
    token_path.write_text(secrets.token_hex(32))
    token_path.chmod(0o600)
    return temp_dir


IDLE_WORKER_KEPT_MS = 600_000
"""A lab node's idle Ray workers live this long (Ray's default: 1 s past the node's CPU count).
A lab node has 1-2 CPUs, so Ray killed a worker between two tasks a second apart and started
a new one for the next (about a second of CPU each, on the site's one CPU); a real node's
pool is as large as its 16 CPUs."""


def _lab_env(state: LabState, temp_dir: Path) -> dict[str, str]:
    return {
        MARKER_ENV: state.lab_id,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(temp_dir / "ray_auth_token"),
        "RAY_idle_worker_killing_time_threshold_ms": str(IDLE_WORKER_KEPT_MS),
    }


def build_lab(state: LabState, profile: Profile, nodes: list[NodeSpec],
              cpus: dict[str, int], object_store_bytes: int,
              progress: Progress) -> LabDescription:
    temp_dir = _new_temp_dir(state)
    env = _lab_env(state, temp_dir)
    storage = {site: str(temp_dir / "storage" / site) for site in SITES}
    namespaces = {part: namespace_name(state.lab_id, part)
                  for part in (SITE_ONPREM, SITE_CLOUD, S3_NAMESPACE_ROLE)}
    progress(f"creating namespaces {', '.join(namespaces.values())}")
    taken = netns.existing_namespaces() & set(namespaces.values())
    if taken:
        raise UserError(f"namespaces already exist, not ours to use: {', '.join(taken)}")
    for namespace in namespaces.values():
        state.namespaces.append(namespace)
        state.save()
        netns.create_namespace(namespace)
    netns.wire(namespaces, nodes)
    shaping = netns.shape(namespaces, profile, netns.netem_available(namespaces[SITE_ONPREM]),
                          progress)
    cpus_split = split_cpus()
    progress("CPUs per site: " + ", ".join(f"{site} {cpu_list(ids)}"
                                           for site, ids in cpus_split.sites.items())
             + (" (one CPU: the sites share it)" if cpus_split.shared else "")
             + f"; S3 service {cpu_list(cpus_split.services)}")
    prefixes = {site: site_prefix(namespaces[site], storage[peer_site(site)], env,
                                  cpus_split.taskset(site))
                for site in SITES}
    s3_url = f"http://{S3_SERVICE_IP}:{S3_PORT}"
    temp = Path(state.temp_dir)
    watched: dict[str, Any] = {}
    progress(f"starting the S3 endpoint (moto_server) at {s3_url}")
    start_process(state, "s3", site_prefix(namespaces[S3_NAMESPACE_ROLE], None, env, [])
                  + moto_argv("0.0.0.0", S3_PORT), env, watched)
    head = nodes[0]
    head_ports = lab_ports(head.index)
    head_address = f"{head.ip}:{head_ports.gcs}"
    for node in nodes:
        progress(f"starting Ray {node.role} node {node.index} at {node.site} ({node.ip})")
        argv = ray_node_argv(node, head_address=head_address, num_cpus=cpus[node.role],
                             ports=lab_ports(node.index), dashboard_host="0.0.0.0",
                             object_store_bytes=object_store_bytes, temp_dir=temp)
        start_process(state, f"ray-{node.role}-{node.index}", prefixes[node.site] + argv, env,
                      watched)
        if node.role == ROLE_LOGIN:  # the others join only once the head node is registered
            probe(state, prefixes[SITE_ONPREM] + _probe("tcp", head.ip, str(head_ports.gcs)),
                  "the Ray head's GCS", 120, watched)
            probe(state, prefixes[SITE_ONPREM] + _probe("ray", head_address, "1"),
                  "the Ray head node", 120, watched)
    for site in SITES:
        probe(state, prefixes[site] + _probe("http", s3_url), f"S3 from {site}", 30, watched)
    progress(f"waiting for {len(nodes)} Ray nodes to join")
    joined = probe(state, prefixes[SITE_ONPREM] + _probe("ray", head_address, str(len(nodes))),
                   "the Ray cluster", 120, watched)
    notes = [] if shaping.delay_applied else [
        "delay, jitter and loss NOT applied: this kernel has no sch_netem; rate only (tbf)"
    ]
    return LabDescription(
        lab_id=state.lab_id,
        kind=LAB_KIND,
        profile=profile.name,
        profile_source=profile.source,
        shaping=shaping.to_dict(),
        notes=notes,
        ray_address=head_address,
        dashboard_url=f"http://{head.ip}:{head_ports.dashboard}",
        env=env,
        storage=storage,
        s3_endpoint_url=s3_url,
        s3_credentials=S3_CREDENTIALS,
        site_prefixes=prefixes,
        namespaces=namespaces,
        cpus=cpus_split.to_dict(),
        site_cidrs=dict(SITE_CIDR),
        nodes=list(joined["nodes"]),  # type: ignore[call-overload]
        temp_dir=state.temp_dir,
        state_file=str(state.path),
    )


def _probe(*args: str) -> list[str]:
    return [sys.executable, "-m", "netem.lab.probe", *args]
