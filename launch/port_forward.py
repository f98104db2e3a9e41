"""`kubectl port-forward` to a Kubernetes service, on a free local port, for as long as
needed; the kubeconfig (a secret) lives in a private temporary file meanwhile."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from tempfile import NamedTemporaryFile

from launch.tunnel import tunnel
from netem.ports import free_local_port


@contextmanager
def private_file(content: str, suffix: str) -> Iterator[Path]:
    with NamedTemporaryFile("w", suffix=suffix, delete=False) as handle:
        os.chmod(handle.name, 0o600)
        handle.write(content)
    try:
        yield Path(handle.name)
    finally:
        Path(handle.name).unlink(missing_ok=True)


@contextmanager
def port_forward(kubeconfig: str, namespace: str, service: str, remote_port: int) -> Iterator[int]:
    """Forward a free local port to `svc/<service>:<remote_port>`; yields the local port
    once kubectl reports the forward, and stops kubectl afterwards."""
    with private_file(kubeconfig, ".kubeconfig") as config_file:
        local_port = free_local_port()
        command = [
            "kubectl",
            "--kubeconfig",
            str(config_file),
            "port-forward",
            "-n",
            namespace,
            f"svc/{service}",
            f"{local_port}:{remote_port}",
            "--address",
            "127.0.0.1",
        ]
        with tunnel(command, "Forwarding from", "--stack"):
            yield local_port
