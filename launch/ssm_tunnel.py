"""An SSM port-forwarding session to a port on an EC2 instance (no SSH, no open port):
`aws ssm start-session --document-name AWS-StartPortForwardingSession`, on a free local
port, for as long as needed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from launch.tunnel import TunnelFailed, tunnel
from netem.ports import free_local_port

READY_TEXT = "Waiting for connections"
PLUGIN_MISSING_TEXT = "SessionManagerPlugin is not found"
PLUGIN_HINT = (
    "the AWS CLI's Session Manager plugin is not installed (needed for --stack): install it, "
    "see https://docs.aws.amazon.com/systems-manager/latest/userguide/"
    "session-manager-working-with-install-plugin.html"
)


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
        with tunnel(command, READY_TEXT, "--stack"):
            yield local_port
    except TunnelFailed as failed:
        if PLUGIN_MISSING_TEXT in str(failed):
            raise TunnelFailed(PLUGIN_HINT) from None
        raise
