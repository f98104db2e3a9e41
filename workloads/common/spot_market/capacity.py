"""Spot capacity traces: how many spot instances could be had (or stayed up) at each tick,
in the format of the public spot-traces data set (Can't Be Late, NSDI'24):

    {"metadata": {"gap_seconds": 300}, "data": [16, 16, 15, 12, ...]}

`data[i]` holds from `i·gap_seconds` until the next tick. The trace is replayed like a price
trace: `compression` trace seconds per wall-clock second, looping, from an offset.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vocab.errors import UserError
from workloads.common.input_files import MB, InputFileError, read_input_text

CAPACITY_TRACE_FLAG = "--capacity-trace"
MAX_CAPACITY_TRACE_BYTES = 64 * MB
"""A year of 60 s ticks is about 3 MB; the public files are far smaller."""


class CapacityTraceError(UserError, ValueError):
    """A capacity trace that cannot be used, with the file and what is wrong in it."""


@dataclass(frozen=True)
class CapacityTrace:
    file: Path
    gap_s: float
    counts: tuple[int, ...]

    @property
    def span_s(self) -> float:
        return self.gap_s * len(self.counts)

    def mean(self) -> float:
        return sum(self.counts) / len(self.counts)


def load_capacity_trace(file: Path) -> CapacityTrace:
    """Read and check a capacity trace; any problem is one CapacityTraceError naming the
    flag and the file."""
    try:
        text = read_input_text(CAPACITY_TRACE_FLAG, Path(file),
                               max_bytes=MAX_CAPACITY_TRACE_BYTES)
    except InputFileError as error:
        raise CapacityTraceError(str(error)) from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise CapacityTraceError(f"{CAPACITY_TRACE_FLAG}: {file} is not JSON: {error}") from None
    try:
        return _parse(Path(file), document)
    except CapacityTraceError as error:
        raise CapacityTraceError(f"{CAPACITY_TRACE_FLAG}: {file}: {error}") from None


def _parse(file: Path, document: Any) -> CapacityTrace:
    if not isinstance(document, dict):
        raise CapacityTraceError(f"expected an object with 'metadata' and 'data', "
                                 f"got a {type(document).__name__}")
    metadata = document.get("metadata")
    if not isinstance(metadata, dict) or "gap_seconds" not in metadata:
        raise CapacityTraceError("has no 'metadata': {'gap_seconds': N}")
    gap = metadata["gap_seconds"]
    if isinstance(gap, bool) or not isinstance(gap, int | float) or not math.isfinite(gap) \
            or gap <= 0:
        raise CapacityTraceError(f"gap_seconds must be a number > 0, got {gap!r}")
    data = document.get("data")
    if not isinstance(data, list):
        raise CapacityTraceError(f"has no 'data' list (found {sorted(document)})")
    if not data:
        raise CapacityTraceError("'data' is empty")
    counts: list[int] = []
    for index, count in enumerate(data):
        whole = isinstance(count, int) or (isinstance(count, float) and count.is_integer())
        if isinstance(count, bool) or not whole or count < 0:
            raise CapacityTraceError(
                f"data[{index}] is {count!r}: counts are whole numbers ≥ 0"
            )
        counts.append(int(count))
    return CapacityTrace(file=file, gap_s=float(gap), counts=tuple(counts))


@dataclass(frozen=True)
class CapacityReplay:
    """The trace on a wall clock: `compression` trace seconds per wall second (the price
    trace's compression), starting `offset_s` trace seconds in, looping."""

    trace: CapacityTrace
    compression: float
    offset_s: float = 0.0

    def tick_at(self, wall_s: float) -> int:
        trace_s = self.offset_s + max(wall_s, 0.0) * self.compression
        return int(trace_s // self.trace.gap_s) % len(self.trace.counts)

    def capacity_at(self, wall_s: float) -> int:
        return self.trace.counts[self.tick_at(wall_s)]

    @classmethod
    def seeded(cls, trace: CapacityTrace, compression: float, seed: int) -> CapacityReplay:
        """Seed 0 starts at the first tick; other seeds at a tick drawn from the seed, so
        seeds see different stretches of the same trace."""
        if seed == 0:
            return cls(trace, compression)
        import numpy as np  # not at import: option modules import this one

        tick = int(np.random.default_rng([seed, 31337]).integers(len(trace.counts)))
        return cls(trace, compression, tick * trace.gap_s)


def split_capacity(
    capacity: int, asked: list[int], granted: list[int]
) -> tuple[list[int], list[int]]:
    """Which of the asked spot instances exist: those granted before keep their place
    (oldest first) as far as `capacity` goes, then new ones in the order asked. Returns
    (granted now, in grant order; preempted: granted before, still asked, now over capacity)."""
    wanted = set(asked)
    kept = [index for index in granted if index in wanted]
    preempted = kept[capacity:]
    kept = kept[:capacity]
    for index in asked:
        if len(kept) >= capacity:
            break
        if index not in kept:
            kept.append(index)
    return kept, preempted
