"""An SSM port-forwarding session to a port on an EC2 instance (no SSH, no open port):
`aws ssm start-session --document-name AWS-StartPortForwardingSession`, on a free local
port, for as long as needed."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from launch.port_forward import free_local_port

READY_TIMEOUT_S = 60.0
READY_TEXT = "Waiting for connections"


class TunnelFailed(RuntimeError):
    """The SSM session did not open the forward."""


def tunnel_command(
    instance_id: str, remote_port: int, local_port: int, region: str | None
) -> list[str]:
    command = [
        "aws",
        "ssm",
        "start-session",
        "--target",
        instance_id,
        "--document-name",
        "AWS-StartPortForwardingSession",
        "--parameters",
        f"portNumber={remote_port},localPortNumber={local_port}",
    ]
    return command + (["--region", region] if region else [])


@contextmanager
def ssm_port_forward(
    instance_id: str, remote_port: int, region: str | None = None
) -> Iterator[int]:
    """Forward a free local port to `remote_port` on the instance; yields the local port
    once the session reports it is waiting for connections; ends the session afterwards."""
    local_port = free_local_port()
    command = tunnel_command(instance_id, remote_port, local_port, region)
    try:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    except FileNotFoundError:
        raise TunnelFailed("the aws CLI is not installed (needed for --stack)") from None
    try:
        _wait_until_ready(process)
        yield local_port
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_ready(process: subprocess.Popen[str]) -> None:
    timer = threading.Timer(READY_TIMEOUT_S, process.kill)
    timer.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if READY_TEXT in line:
                # keep draining, or the session blocks once its output fills the pipe
                threading.Thread(target=process.stdout.read, daemon=True).start()
                return
    finally:
        timer.cancel()
    error = process.stderr.read() if process.stderr else ""
    raise TunnelFailed(f"aws ssm start-session ended before forwarding: {error.strip()}")
