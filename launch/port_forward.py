"""kubectl for a `--stack` run: `kubectl port-forward` to a Kubernetes service on a free
local port for as long as needed, and one key of a Secret read into memory. The kubeconfig
(a secret) lives in a private temporary file meanwhile."""

from __future__ import annotations

import base64
import binascii
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from tempfile import NamedTemporaryFile

from launch.tunnel import tunnel
from netem.ports import free_local_port
from vocab.errors import UserError


@contextmanager
def private_file(content: str, suffix: str) -> Iterator[Path]:
    with NamedTemporaryFile("w", suffix=suffix, delete=False) as handle:
        os.chmod(handle.name, 0o600)
        handle.write(content)
    try:
        yield Path(handle.name)
    finally:
        Path(handle.name).unlink(missing_ok=True)


KUBECTL_REQUEST_TIMEOUT_S = 20.0
"""kubectl's own deadline on each request to the API server (--request-timeout)."""
KUBECTL_TIMEOUT_S = 40.0
"""The longest a kubectl call may run in all; past it, it is killed."""


class SecretUnreadable(UserError, RuntimeError):
    """kubectl could not read the Secret's key (missing, no access, not base64)."""


def read_secret(config_file: Path, namespace: str, secret: str, key: str) -> str:
    """The decoded value of `key` in Secret `namespace/secret`, kept in memory only."""
    command = [
        "kubectl",
        "--kubeconfig",
        str(config_file),
        "get",
        "secret",
        secret,
        "-n",
        namespace,
        "-o",
        f"jsonpath={{.data.{key}}}",
        f"--request-timeout={KUBECTL_REQUEST_TIMEOUT_S:g}s",
    ]
    try:
        completed = subprocess.run(command, capture_output=True, text=True,
                                   timeout=KUBECTL_TIMEOUT_S)
    except FileNotFoundError:
        raise SecretUnreadable("kubectl is not installed (needed for --stack)") from None
    except subprocess.TimeoutExpired:
        raise SecretUnreadable(f"secret {namespace}/{secret}: the cluster's API server did "
                               f"not answer within {KUBECTL_TIMEOUT_S:g} s") from None
    if completed.returncode != 0 or not completed.stdout.strip():
        why = completed.stderr.strip() or f"no key {key!r}"
        raise SecretUnreadable(f"secret {namespace}/{secret}: {why}")
    try:
        return base64.b64decode(completed.stdout.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise SecretUnreadable(f"secret {namespace}/{secret}: {key} is not base64") from None


@contextmanager
def port_forward(
    config_file: Path, namespace: str, service: str, remote_port: int, kind: str = "svc"
) -> Iterator[int]:
    """Forward a free local port to `<kind>/<service>:<remote_port>` (a Service, or with
    kind "pod" one pod); yields the local port once kubectl reports the forward, and stops
    kubectl afterwards."""
    local_port = free_local_port()
    command = [
        "kubectl",
        "--kubeconfig",
        str(config_file),
        "port-forward",
        "-n",
        namespace,
        f"{kind}/{service}",
        f"{local_port}:{remote_port}",
        "--address",
        "127.0.0.1",
    ]
    with tunnel(command, "Forwarding from", "--stack"):
        yield local_port
