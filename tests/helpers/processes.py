"""Real helper processes for tests, started and stopped with `procs` (by PID, never by name):
a `ray start --head` on free loopback ports and a `moto_server` (S3 and EC2 APIs)."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import procs
from netem.ports import free_local_port, free_local_ports

BIN = Path(sys.executable).parent
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
RAY_PORT_FLAGS = (
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


def ctrl_c_as_from_a_terminal() -> None:
    """preexec_fn of a child a test interrupts with SIGINT: Ctrl-C acts as it does for a
    command typed in a terminal, whatever the test process inherited (Python installs its
    KeyboardInterrupt handler only when SIGINT is not ignored at start-up)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def moto_server() -> Iterator[str]:
    """Yields the endpoint URL once the server says it is running."""
    port = free_local_port()
    with tempfile.TemporaryDirectory(prefix="moto-") as folder:
        log = Path(folder) / "moto.log"
        server = procs.spawn([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                             log_path=log)
        try:
            procs.wait_for_file_line(server, log, "Running on", timeout_s=60, name="moto_server")
            yield f"http://127.0.0.1:{port}"
        finally:
            procs.stop(server)


@contextmanager
def ray_head(
    extra_env: dict[str, str] | None = None, bin_dir: Path | None = None
) -> Iterator[str]:
    """A real `ray start --head --block`; yields the dashboard address once the head says it
    started (jobs inherit `extra_env`). `bin_dir`: the Python environment the head and its
    jobs run from (default: the tests' own). Stopped by its PID: `ray start --block` stops
    its own node's processes when it gets SIGTERM."""
    bin_dir = bin_dir or BIN
    temp_dir = Path(tempfile.mkdtemp(prefix="rh-", dir="/tmp"))
    ports = dict(zip(RAY_PORT_FLAGS, free_local_ports(len(RAY_PORT_FLAGS)), strict=True))
    command = [
        str(bin_dir / "ray"), "start", "--head", "--block", "--num-cpus", "2",
        "--temp-dir", str(temp_dir), "--node-ip-address", "127.0.0.1",
        "--dashboard-host", "127.0.0.1", "--include-dashboard", "true",
    ]
    for flag, port in ports.items():
        command += [flag, str(port)]
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",  # the job's `python`
        "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",  # SIGTERM: stop now, no 30 s drain
        **(extra_env or {}),
    }
    log = temp_dir / "head.log"
    head = procs.spawn(command, env=env, log_path=log)
    try:
        procs.wait_for_file_line(head, log, "Ray runtime started", timeout_s=120,
                                 name="ray start --head")
        yield f"http://127.0.0.1:{ports['--dashboard-port']}"
    finally:
        procs.stop(head, grace_s=60)
        shutil.rmtree(temp_dir, ignore_errors=True)
