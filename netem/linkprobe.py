"""A one-connection TCP stream for measuring a lab link: `python -m netem.linkprobe ...`.

`receive` listens, prints {"ready": true}, reads one connection to its end and prints the
payload rate it saw (first byte to end of stream, so the sender's queue drain is counted).
`send` writes as fast as the link lets it for a fixed time.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time

BUFFER_BYTES = 64 * 1024
READY = json.dumps({"ready": True})


def receive(port: int, timeout_s: float) -> dict[str, float]:
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("0.0.0.0", port))
        server.listen(1)
        server.settimeout(timeout_s)
        print(READY, flush=True)
        connection, _ = server.accept()
        with connection:
            connection.settimeout(timeout_s)
            total = 0
            first = 0.0
            while chunk := connection.recv(1 << 20):
                if total == 0:
                    first = time.monotonic()
                total += len(chunk)
            seconds = time.monotonic() - first
    return {"bytes": total, "seconds": seconds, "mbit": total * 8 / seconds / 1e6}


def send(host: str, port: int, seconds: float) -> dict[str, float]:
    payload = b"\0" * BUFFER_BYTES
    sent = 0
    with socket.create_connection((host, port), timeout=30) as connection:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            connection.sendall(payload)
            sent += len(payload)
    return {"bytes": sent}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m netem.linkprobe")
    sub = parser.add_subparsers(dest="role", required=True)
    receiver = sub.add_parser("receive", help="receive one stream and report its rate")
    receiver.add_argument("--port", type=int, required=True)
    receiver.add_argument("--timeout", type=float, default=60.0, help="seconds to wait")
    sender = sub.add_parser("send", help="send a stream for a fixed time")
    sender.add_argument("--host", required=True)
    sender.add_argument("--port", type=int, required=True)
    sender.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args(argv)
    if args.role == "receive":
        result = receive(args.port, args.timeout)
    else:
        result = send(args.host, args.port, args.seconds)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
