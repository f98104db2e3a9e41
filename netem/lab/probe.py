"""Readiness probes run inside a lab site: `python -m netem.lab.probe http|tcp|ray ...`.

They run where the lab's traffic runs (inside a namespace through the site's command
prefix), poll for their condition until a deadline, print one JSON line and exit 0, or
exit 1 with the reason.
"""

from __future__ import annotations

import argparse
import json
import logging
import socket
import sys
import time
import urllib.error
import urllib.request
from typing import Any

POLL_S = 0.25


def wait_http(url: str, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    last_error = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return {"url": url, "status": response.status}
        except urllib.error.HTTPError as error:
            return {"url": url, "status": error.code}
        except OSError as error:
            last_error = str(error)
        time.sleep(POLL_S)
    raise TimeoutError(f"{url} did not answer within {timeout_s:g} s: {last_error}")


def wait_tcp(host: str, port: int, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    last_error = ""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=2):
                return {"host": host, "port": port}
        except OSError as error:
            last_error = str(error)
        time.sleep(POLL_S)
    raise TimeoutError(f"{host}:{port} did not accept within {timeout_s:g} s: {last_error}")


def wait_ray_nodes(address: str, count: int, timeout_s: float) -> dict[str, Any]:
    import ray

    deadline = time.monotonic() + timeout_s
    while True:  # a GCS that accepts connections may not have its head node registered yet
        try:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
            break
        except ConnectionError:
            ray.shutdown()
            if time.monotonic() > deadline:
                raise
            time.sleep(POLL_S)
    try:
        alive: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            alive = [node for node in ray.nodes() if node["Alive"]]
            if len(alive) >= count:
                return {"nodes": [_node_summary(node) for node in alive]}
            time.sleep(POLL_S)
        raise TimeoutError(f"{len(alive)} of {count} Ray nodes alive after {timeout_s:g} s")
    finally:
        ray.shutdown()


def _node_summary(node: dict[str, Any]) -> dict[str, Any]:
    labels = node.get("Labels") or {}
    return {
        "ip": node["NodeManagerAddress"],
        "labels": {key: value for key, value in labels.items() if not key.startswith("ray.")},
        "resources": node["Resources"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m netem.lab.probe")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--timeout", type=float, default=60.0, help="seconds to wait")
    sub = parser.add_subparsers(dest="what", required=True)
    http = sub.add_parser("http", parents=[common], help="wait until an HTTP endpoint answers")
    http.add_argument("url")
    tcp = sub.add_parser("tcp", parents=[common], help="wait until a TCP port accepts connections")
    tcp.add_argument("host")
    tcp.add_argument("port", type=int)
    ray_nodes = sub.add_parser("ray", parents=[common],
                               help="wait until a Ray cluster has N alive nodes")
    ray_nodes.add_argument("address")
    ray_nodes.add_argument("count", type=int)
    args = parser.parse_args(argv)
    try:
        if args.what == "http":
            result = wait_http(args.url, args.timeout)
        elif args.what == "tcp":
            result = wait_tcp(args.host, args.port, args.timeout)
        else:
            result = wait_ray_nodes(args.address, args.count, args.timeout)
    except (TimeoutError, ConnectionError) as error:
        print(str(error), file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
