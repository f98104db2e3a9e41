"""A local `moto_server` (S3 and EC2 APIs) on a free loopback port, stopped by its PID."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from launch.tunnel import free_local_port

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextmanager
def moto_server() -> Iterator[str]:
    """Yields the endpoint URL once the server says it is running."""
    port = free_local_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        seen = []
        for line in server.stderr:
            seen.append(line)
            if "Running on" in line:
                break
        else:
            raise RuntimeError("moto_server did not start:\n" + "".join(seen))
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)
