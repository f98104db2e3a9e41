"""User-space rate limiting for the process lab, where the kernel shapes nothing.

A token bucket paces a sender (or a reader of cross-site data) to `rate_mbit`; it is what
the "process" lab stands on instead of tbf, so every result it produces says kind "process".
"""

from __future__ import annotations

import time
from typing import BinaryIO

CHUNK_BYTES = 64 * 1024


class TokenBucket:
    """At most `rate_mbit` on average, with bursts of up to `burst_bytes`."""

    def __init__(self, rate_mbit: float, burst_bytes: int = 128 * 1024) -> None:
        if rate_mbit <= 0:
            raise ValueError(f"rate_mbit must be > 0, got {rate_mbit}")
        self.bytes_per_s = rate_mbit * 1e6 / 8
        self.burst_bytes = burst_bytes
        self._tokens = float(burst_bytes)
        self._last = time.monotonic()

    def take(self, nbytes: int) -> None:
        """Block until `nbytes` may pass."""
        self._refill()
        self._tokens -= nbytes
        if self._tokens < 0:
            time.sleep(-self._tokens / self.bytes_per_s)
            self._refill()

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self.burst_bytes,
                           self._tokens + (now - self._last) * self.bytes_per_s)
        self._last = now


def throttled_copy(source: BinaryIO, target: BinaryIO, rate_mbit: float) -> int:
    """Copy a stream at no more than `rate_mbit` (a cross-site read in the process lab)."""
    bucket = TokenBucket(rate_mbit)
    copied = 0
    while chunk := source.read(CHUNK_BYTES):
        bucket.take(len(chunk))
        target.write(chunk)
        copied += len(chunk)
    return copied
