"""Bad peers on loopback for the deadline tests: a TCP server that reads each request and
answers as its mode says — `silent` (never), `drip` (a status line one byte every 0.2 s,
forever), `drip-body` (a whole status line and headers, then the body one byte every 0.2 s,
forever), `garbage` (bytes of no protocol, then more of them dripped) or `html` (a web page
where an API was expected)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

MODES = ("silent", "drip", "drip-body", "garbage", "html")
BAD_PEERS = ("silent", "drip", "drip-body", "garbage")
"""The peers a deadline is about: each must end a task in one line within its bound."""


class LoopbackServer:
    def __init__(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(mode)
        self.mode = mode
        self.listener = socket.create_server(("127.0.0.1", 0))
        self._port: int = self.listener.getsockname()[1]
        self.listener.settimeout(0.2)
        self.stopped = threading.Event()
        self.accepted = threading.Event()
        """Set once a client connected: it now waits on this server."""
        self.first_accept: float | None = None
        """time.monotonic() of the first connection."""
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            if self.first_accept is None:
                self.first_accept = time.monotonic()
            self.accepted.set()
            thread = threading.Thread(target=self._serve, args=(connection,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            connection.settimeout(0.2)
            try:
                connection.recv(65536)
            except (TimeoutError, OSError):
                pass
            opening, drip = {
                "html": (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 44"
                         b"\r\n\r\n<html><body>Welcome to nginx!</body></html>", b""),
                "drip": (b"", b"X"),
                "drip-body": (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                              b"Content-Length: 1000000\r\n\r\n", b" "),
                "garbage": (b"\x00\xff\x13garbage\r\n\r\n" * 8, b"\x17\x03"),
                "silent": (b"", b""),
            }[self.mode]
            try:
                connection.sendall(opening)
                while not self.stopped.is_set():
                    if drip:
                        connection.sendall(drip)
                    self.stopped.wait(0.2)
            except OSError:
                return

    def close(self) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(timeout=5)
        self.listener.close()


@contextmanager
def bad_peer(mode: str) -> Iterator[LoopbackServer]:
    server = LoopbackServer(mode)
    try:
        yield server
    finally:
        server.close()
