"""When a run's spot nodes are interrupted (`--preemptions SCHEDULE`), and what is recorded
of each interruption (`preemptions.jsonl` in the run's record of its infrastructure,
`<out>/spotlab/` on the lab; the workloads' own `records/preemptions.jsonl` is what they
saw): one language and one record, written so
that a deployed stack (AWS FIS experiments at the schedule's times) can carry out and record
the same. Pure: the spot lab's supervisor carries a schedule out (spotlab.capacity).

A schedule is one of:
- `model` — the spot lab's preemption model: per spot slot the two-state Markov chain of
  `--alpha`, `--refresh` and `--lab-seed` (α = 1: never), or with `--trace/--bid` the price
  trace. Not set, `--preemptions` is this: what the lab did before schedules existed.
- `none` — no interruption at all.
- `at:T,T,...` — one interruption at each time T after the run's start: seconds, or a number
  with a unit `s`, `m` or `h` (`at:90,5m,5m,1h`: a time given twice interrupts two nodes).

Times are wall-clock seconds since the lab came up (or, on a stack, since the run was
submitted): the workload runs at the same speed on both, so the same schedule hits it at the
same moments. Only the spot market's own delays (the two-minute warning, a replacement's
arrival) are compressed on the lab. Points relative to a run's progress (a step, the start
of a worker group) are not times: the workload's driver
announces those and the target carries them out as they come.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

MODEL = "model"
NONE = "none"
AT_PREFIX = "at:"
UNITS_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
MAX_TIME_S = 7 * 24 * 3600.0
"""A week: a time past this is a slip of a unit, not a run."""
_TIME = re.compile(r"^(\d+(?:\.\d+)?)([smh]?)$")

CAUSE_NOTICE = "notice"
"""The node ended at its interruption notice's deadline."""
CAUSE_REBALANCE = "rebalance"
"""The node group drained and removed the node on a rebalance recommendation, before any
interruption notice reached it."""

PREEMPTION_RECORD = "preemptions"
"""`preemptions.jsonl`: one row per interrupted node."""
RECORD_FIELDS = (
    "scheduled_at",
    "rebalance_at",
    "notice_at",
    "drain_seen_at",
    "gone_at",
    "replacement_joined_at",
    "cause",
    "node",
    "ray_node_id",
    "pool",
    "instance_id",
)
"""Every row has exactly these keys; times are epoch seconds (None: did not happen, or not
seen). `scheduled_at` is when the schedule asked for the interruption, `rebalance_at` when a
rebalance recommendation reached the node, `notice_at` its interruption notice,
`drain_seen_at` when Ray first listed it as draining, `gone_at` when the node was gone (its
deadline's kill on the lab, Ray's node table on a stack), `replacement_joined_at` when the
node that took its place joined Ray."""


class ScheduleError(ValueError):
    """A schedule that cannot be read; the message names the part."""


@dataclass(frozen=True)
class PreemptionSchedule:
    kind: str
    """MODEL, NONE or "at"."""
    times_s: tuple[float, ...] = ()
    """For "at": the interruption times, ascending."""

    @property
    def text(self) -> str:
        if self.kind == "at":
            return AT_PREFIX + ",".join(f"{t:g}" for t in self.times_s)
        return self.kind


def parse_schedule(text: str) -> PreemptionSchedule:
    """`"at:90,5m"` → its schedule; ScheduleError names what is wrong."""
    word = text.strip()
    if word in (MODEL, NONE):
        return PreemptionSchedule(word)
    if not word.startswith(AT_PREFIX):
        raise ScheduleError(f"{text!r} is not a schedule: give {MODEL} (the lab's Markov chain "
                            f"or price trace), {NONE}, or {AT_PREFIX}T,T,... (times after the "
                            "start, e.g. at:90,5m)")
    parts = [part.strip() for part in word.removeprefix(AT_PREFIX).split(",")]
    if parts == [""]:
        raise ScheduleError(f"{text!r} names no time after {AT_PREFIX!r}")
    return PreemptionSchedule("at", tuple(sorted(_seconds(part) for part in parts)))


def _seconds(part: str) -> float:
    match = _TIME.match(part)
    if match is None:
        raise ScheduleError(f"{part!r} is not a time: seconds (90) or a number with s, m or h "
                            "(90s, 5m, 1h)")
    seconds = float(match[1]) * UNITS_S[match[2]]
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TIME_S):
        raise ScheduleError(f"{part!r} must be after the start and within a week")
    return seconds


def preemption_record(**values: Any) -> dict[str, Any]:
    """One row of preemptions.jsonl: every field, None where not given."""
    unknown = set(values) - set(RECORD_FIELDS)
    if unknown:
        raise TypeError(f"not preemption record fields: {sorted(unknown)}")
    if values.get("cause") not in (CAUSE_NOTICE, CAUSE_REBALANCE):
        raise ValueError(f"cause must be {CAUSE_NOTICE} or {CAUSE_REBALANCE}, "
                         f"got {values.get('cause')!r}")
    return {name: values.get(name) for name in RECORD_FIELDS}
