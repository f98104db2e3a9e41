"""Spot capacity traces: how many spot instances could be had (or stayed up) at each tick,
in the format of the public spot-traces data set (Can't Be Late, NSDI'24):

    {"metadata": {"gap_seconds": 300}, "data": [16, 16, 15, 12, ...]}

`data[i]` holds from `i·gap_seconds` until the next tick. The trace is replayed like a price
trace: `compression` trace seconds per wall-clock second, from a start tick, looping (or
ending with the trace, as Can't Be Late's simulator does).

What a value means is the user's to say (`reading`): `count`, the number of spot instances
that can be had (the spot-traces README's words), or `unavailable`, 1 when no spot instance
can be had and 0 when one can (how Can't Be Late's simulator reads its 1-node availability
traces: `spot_available = not trace[tick]`).
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
READINGS = ("count", "unavailable")
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


def load_capacity_trace(file: Path, reading: str = "count") -> CapacityTrace:
    """Read and check a capacity trace, its values read as `reading` says; any problem is
    one CapacityTraceError naming the flag and the file."""
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
        return _parse(Path(file), document, reading)
    except CapacityTraceError as error:
        raise CapacityTraceError(f"{CAPACITY_TRACE_FLAG}: {file}: {error}") from None


def _parse(file: Path, document: Any, reading: str) -> CapacityTrace:
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
        if reading == "unavailable" and count > 1:
            raise CapacityTraceError(
                f"data[{index}] is {count!r}: read as 'unavailable' (--capacity-reading), "
                f"values are 0 (a spot instance can be had) or 1 (none can)")
        counts.append(int(count) if reading == "count" else 1 - int(count))
    return CapacityTrace(file=file, gap_s=float(gap), counts=tuple(counts))


class TraceEnded(Exception):
    """A replay that does not loop was asked for a time past its trace's end."""


@dataclass(frozen=True)
class CapacityReplay:
    """The trace on a wall clock: `compression` trace seconds per wall second (the price
    trace's compression), starting at tick `start`, looping unless `loop` is False."""

    trace: CapacityTrace
    compression: float
    start: int = 0
    loop: bool = True

    @property
    def offset_s(self) -> float:
        return self.start * self.trace.gap_s

    @property
    def gap_s(self) -> float:
        """One tick on the wall clock."""
        return self.trace.gap_s / self.compression

    def tick_at(self, wall_s: float) -> int:
        """The tick (counted from the start, not wrapped) that holds at `wall_s` (a tick's
        start computed in floating point, `tick_start`, is in that tick)."""
        if wall_s <= 0.0:
            return 0
        return int(wall_s * self.compression / self.trace.gap_s + 1e-9)

    def capacity_at(self, wall_s: float) -> int:
        return self.capacity_of_tick(self.tick_at(wall_s))

    def capacity_of_tick(self, tick: int) -> int:
        index, counts = self.start + tick, self.trace.counts
        if index >= len(counts):
            if not self.loop:
                raise TraceEnded(f"the capacity trace {self.trace.file.name} ended (tick "
                                 f"{len(counts)}) before the work was done")
            index %= len(counts)
        return counts[index]

    def tick_start(self, tick: int) -> float:
        """Where tick `tick` (counted from the start) begins on the wall clock."""
        return tick * self.trace.gap_s / self.compression

    @classmethod
    def seeded(cls, trace: CapacityTrace, compression: float, seed: int,
               start: int | None = None, loop: bool = True) -> CapacityReplay:
        """From tick `start`; not given, seed 0 starts at the first tick and other seeds at
        a tick drawn from the seed, so seeds see different stretches of the same trace."""
        if start is not None:
            if start >= len(trace.counts):
                raise CapacityTraceError(f"--start {start}: {trace.file.name} has "
                                         f"{len(trace.counts)} ticks")
            return cls(trace, compression, start, loop)
        if seed == 0:
            return cls(trace, compression, 0, loop)
        import numpy as np  # not at import: option modules import this one

        tick = int(np.random.default_rng([seed, 31337]).integers(len(trace.counts)))
        return cls(trace, compression, tick, loop)


def spread_starts(trace: CapacityTrace, count: int, span_ticks: int = 0) -> list[int]:
    """`count` start ticks spread evenly over the trace, the first at tick 0, each leaving
    `span_ticks` of trace after it (a replay that does not loop); fewer when the trace
    holds fewer distinct ones."""
    last = len(trace.counts) - span_ticks
    if last <= 0:
        raise CapacityTraceError(f"{CAPACITY_TRACE_FLAG}: {trace.file.name} holds "
                                 f"{len(trace.counts)} ticks, fewer than the {span_ticks} a "
                                 f"run that does not loop needs")
    return sorted({index * last // count for index in range(count)})


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
