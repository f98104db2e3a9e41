"""The lab's processes: the S3 endpoint (moto_server) and one `ray start` per node, started
with `procs` and watched while readiness probes run."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import procs
from netem.lab.addressing import NodeSpec
from netem.lab.state import LabState
from vocab.burst import ROLE_LOGIN
from vocab.errors import RunFailed
from vocab.ports import RayPorts
from vocab.ray_start import ray_start_args

PROBE_POLL_S = 0.2
Watched = dict[str, subprocess.Popen[str]]


class LabStartError(RunFailed, RuntimeError):
    """A lab process died or did not become ready; the message carries its log's tail."""


def start_process(state: LabState, name: str, argv: list[str], env: dict[str, str],
                  watched: Watched) -> None:
    """Spawn one long-running lab process, record its PID at once, watch it from now on."""
    process = procs.spawn(argv, env=env, log_path=log_path(state, name))
    state.pids.append(process.pid)
    state.save()
    watched[name] = process


def moto_argv(host: str, port: int) -> list[str]:
    return [sys.executable, "-m", "moto.server", "-H", host, "-p", str(port)]


def ray_node_argv(node: NodeSpec, *, head_address: str, num_cpus: int, ports: RayPorts,
                  dashboard_host: str, object_store_bytes: int, temp_dir: Path) -> list[str]:
    args = ray_start_args(
        node.role,
        node_ip=node.ip,
        num_cpus=num_cpus,
        head_address=None if node.role == ROLE_LOGIN else head_address,
        dashboard_host=dashboard_host,
        ports=ports,
        object_store_memory=object_store_bytes,
        temp_dir=str(temp_dir / f"r{node.index}"),
        block=True,
    )
    ray_cli = str(Path(sys.executable).with_name("ray"))
    return [ray_cli, *args[1:]]


def probe(state: LabState, argv: list[str], what: str, timeout_s: float,
          watched: Watched) -> dict[str, object]:
    """Run a readiness probe (it prints one JSON line and exits) while checking that no
    watched lab process has died."""
    process = procs.spawn([*argv, "--timeout", str(timeout_s)])
    try:
        while process.poll() is None:
            _fail_on_dead(state, watched)
            time.sleep(PROBE_POLL_S)
        out, err = process.communicate()
    finally:
        procs.stop(process)
    if process.returncode != 0:
        _fail_on_dead(state, watched)
        raise LabStartError(f"{what} not ready: {err.strip()[-800:]}")
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def log_path(state: LabState, name: str) -> Path:
    return Path(state.temp_dir) / "logs" / f"{name}.log"


def _fail_on_dead(state: LabState, watched: Watched) -> None:
    for name, process in watched.items():
        if process.poll() is not None:
            raise LabStartError(f"{name} exited with {process.returncode}; its log ends:\n"
                                f"{procs.log_tail(log_path(state, name))}")
