"""Building a lab: the netns kind (namespaces, tc, per-site storage hiding) or the process
kind (one namespace), then the same services on either: moto_server and one Ray node per role.
"""

from __future__ import annotations

import secrets
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
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
from netem.lab.description import LabDescription
from netem.lab.processes import MARKER_ENV
from netem.lab.services import moto_argv, probe, ray_node_argv, start_process
from netem.lab.sites import site_prefix
from netem.lab.state import LabState
from netem.ports import free_local_port
from netem.profile import Profile
from vocab.burst import ROLE_LOGIN, SITE_CLOUD, SITE_ONPREM, SITES, peer_site
from vocab.ports import RayPorts

Progress = Callable[[str], None]
S3_CREDENTIALS = {"aws_access_key_id": "lab", "aws_secret_access_key": "lab",
                  "region_name": "us-east-1"}
PROCESS_FIXED_BASE = 21000
PROCESS_WORKER_BASE = 24000
"""Process lab ports below the ephemeral range and above Ray's default worker ports; one
process lab per machine (a second would collide on them)."""



def _new_temp_dir(state: LabState) -> Path:
    """The lab's directory, recorded before it is made (an interrupt cannot orphan it)."""
    temp_dir = Path(tempfile.gettempdir()) / f"sb-{state.lab_id}"
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


def _lab_env(state: LabState, temp_dir: Path) -> dict[str, str]:
    return {
        MARKER_ENV: state.lab_id,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(temp_dir / "ray_auth_token"),
    }


def build_netns(state: LabState, profile: Profile, nodes: list[NodeSpec],
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
        raise RuntimeError(f"namespaces already exist, not ours to use: {', '.join(taken)}")
    for namespace in namespaces.values():
        state.namespaces.append(namespace)
        state.save()
        netns.create_namespace(namespace)
    netns.wire(namespaces, nodes)
    netem = netns.netem_available(namespaces[SITE_ONPREM])
    delay_applied = netns.shape(namespaces, profile, netem, progress)
    prefixes = {site: site_prefix(namespaces[site], storage[peer_site(site)], env)
                for site in SITES}
    s3_prefix = site_prefix(namespaces[S3_NAMESPACE_ROLE], None, env)
    s3_url = f"http://{S3_SERVICE_IP}:{S3_PORT}"
    notes = [] if delay_applied else [
        "delay, jitter and loss NOT applied: this kernel has no sch_netem; rate only (tbf)"
    ]
    return _start_services(
        state, profile, nodes, cpus, object_store_bytes, progress,
        ports={node.index: lab_ports(node.index) for node in nodes},
        prefixes=prefixes, s3_prefix=s3_prefix, s3_url=s3_url, s3_bind=("0.0.0.0", S3_PORT),
        dashboard_host="0.0.0.0", env=env, storage=storage, delay_applied=delay_applied,
        shaping="tbf on both ends of the site veth (kernel)", notes=notes,
    )


def build_process(state: LabState, profile: Profile, nodes: list[NodeSpec],
                   cpus: dict[str, int], object_store_bytes: int,
                   progress: Progress) -> LabDescription:
    progress("no network namespaces here: single-namespace lab, cross-site reads must be "
             "throttled in user space (netem.throttle)")
    temp_dir = _new_temp_dir(state)
    env = _lab_env(state, temp_dir)
    storage = {site: str(temp_dir / "storage" / site) for site in SITES}
    local_nodes = [replace(node, ip="127.0.0.1") for node in nodes]
    head = RayPorts(
        gcs=free_local_port(), dashboard=free_local_port(), client_server=free_local_port()
    )
    s3_port = free_local_port()
    prefixes = {site: site_prefix(None, None, env) for site in SITES}
    notes = [
        "process lab: all sites share one network namespace; nothing is shaped in the kernel",
        "cross-site reads must go through netem.throttle at target_mbit (user space)",
        "per-site storage directories are separate by convention only (not enforced)",
        "delay, jitter and loss NOT applied",
    ]
    return _start_services(
        state, profile, local_nodes, cpus, object_store_bytes, progress,
        ports={node.index: lab_ports(node.index, head, PROCESS_FIXED_BASE, PROCESS_WORKER_BASE)
               for node in local_nodes},
        prefixes=prefixes, s3_prefix=prefixes[SITE_ONPREM], s3_url=f"http://127.0.0.1:{s3_port}",
        s3_bind=("127.0.0.1", s3_port), dashboard_host="127.0.0.1", env=env,
        storage=storage, delay_applied=False, shaping="user-space token bucket",
        notes=notes,
    )


def _start_services(
    state: LabState, profile: Profile, nodes: list[NodeSpec], cpus: dict[str, int],
    object_store_bytes: int, progress: Progress, *, ports: dict[int, RayPorts],
    prefixes: dict[str, list[str]], s3_prefix: list[str], s3_url: str,
    s3_bind: tuple[str, int], dashboard_host: str, env: dict[str, str],
    storage: dict[str, str], delay_applied: bool, shaping: str, notes: list[str],
) -> LabDescription:
    temp_dir = Path(state.temp_dir)
    watched: dict[str, Any] = {}
    progress(f"starting the S3 endpoint (moto_server) at {s3_url}")
    start_process(state, "s3", s3_prefix + moto_argv(*s3_bind), env, watched)
    head = nodes[0]
    head_address = f"{head.ip}:{ports[head.index].gcs}"
    for node in nodes:
        progress(f"starting Ray {node.role} node {node.index} at {node.site} ({node.ip})")
        argv = ray_node_argv(node, head_address=head_address, num_cpus=cpus[node.role],
                             ports=ports[node.index], dashboard_host=dashboard_host,
                             object_store_bytes=object_store_bytes, temp_dir=temp_dir)
        start_process(state, f"ray-{node.role}-{node.index}", prefixes[node.site] + argv, env,
                      watched)
        if node.role == ROLE_LOGIN:
            probe(state, prefixes[SITE_ONPREM] + _probe("tcp", head.ip, str(ports[head.index].gcs)),
                  "the Ray head's GCS", 60, watched)
    for site in SITES:
        probe(state, prefixes[site] + _probe("http", s3_url), f"S3 from {site}", 30, watched)
    progress(f"waiting for {len(nodes)} Ray nodes to join")
    joined = probe(state, prefixes[SITE_ONPREM] + _probe("ray", head_address, str(len(nodes))),
                   "the Ray cluster", 120, watched)
    return LabDescription(
        lab_id=state.lab_id,
        kind=state.kind,
        profile=profile.name,
        profile_source=profile.source,
        target_mbit=profile.target_mbit(),
        delay_applied=delay_applied,
        shaping=shaping,
        notes=notes,
        ray_address=head_address,
        dashboard_url=f"http://{head.ip}:{ports[head.index].dashboard}",
        env=env,
        storage=storage,
        s3_endpoint_url=s3_url,
        s3_credentials=S3_CREDENTIALS,
        site_prefixes=prefixes,
        site_cidrs=dict(SITE_CIDR) if state.kind == "netns" else {},
        nodes=list(joined["nodes"]),  # type: ignore[call-overload]
        temp_dir=state.temp_dir,
        state_file=str(state.path),
    )


def _probe(*args: str) -> list[str]:
    return [sys.executable, "-m", "netem.lab.probe", *args]


