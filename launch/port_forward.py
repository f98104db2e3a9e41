"""`kubectl port-forward` to a Kubernetes service, on a free local port, for as long as
needed; the kubeconfig (a secret) lives in a private temporary file meanwhile."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from tempfile import NamedTemporaryFile

READY_TIMEOUT_S = 60.0


class PortForwardFailed(RuntimeError):
    """kubectl could not open the forward."""


def free_local_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


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
        try:
            process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        except FileNotFoundError:
            raise PortForwardFailed("kubectl is not installed (needed for --stack)") from None
        try:
            _wait_until_forwarding(process)
            yield local_port
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_until_forwarding(process: subprocess.Popen[str]) -> None:
    """Block until kubectl prints 'Forwarding from', or fail with its error output."""
    timer = threading.Timer(READY_TIMEOUT_S, process.kill)
    timer.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("Forwarding from"):
                # keep reading, or kubectl blocks once its "Handling connection" lines fill
                # the pipe
                threading.Thread(target=process.stdout.read, daemon=True).start()
                return
    finally:
        timer.cancel()
    error = process.stderr.read() if process.stderr else ""
    raise PortForwardFailed(f"kubectl port-forward ended before forwarding: {error.strip()}")
