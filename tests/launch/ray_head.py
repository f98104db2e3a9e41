"""A real `ray start --head` on free loopback ports, stopped by its process group."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from launch.tunnel import free_local_port

PORT_FLAGS = (
    "--port",
    "--node-manager-port",
    "--object-manager-port",
    "--ray-client-server-port",
    "--dashboard-port",
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--runtime-env-agent-port",
    "--metrics-export-port",
)


@contextmanager
def ray_head(extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """Yields the dashboard address once the head reports it started (jobs inherit
    `extra_env`)."""
    temp_dir = Path(tempfile.mkdtemp(prefix="rh-", dir="/tmp"))
    ports = {flag: free_local_port() for flag in PORT_FLAGS}
    command = [
        str(Path(sys.executable).parent / "ray"),
        "start",
        "--head",
        "--block",
        "--num-cpus",
        "2",
        "--temp-dir",
        str(temp_dir),
        "--node-ip-address",
        "127.0.0.1",
        "--dashboard-host",
        "127.0.0.1",
        "--include-dashboard",
        "true",
    ]
    for flag, port in ports.items():
        command += [flag, str(port)]
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",  # the job's `python`
        "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",  # SIGTERM: stop now, no 30 s drain
        **(extra_env or {}),
    }
    head = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        output = []
        assert head.stdout is not None
        for line in head.stdout:
            output.append(line)
            if "Ray runtime started" in line:
                break
        else:
            raise RuntimeError("ray start --head failed:\n" + "".join(output))
        yield f"http://127.0.0.1:{ports['--dashboard-port']}"
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        head.wait(timeout=60)
        shutil.rmtree(temp_dir, ignore_errors=True)
