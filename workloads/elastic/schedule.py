"""The run's preemption schedule (`--preempt-at`), evaluated by the driver against the run's
own progress (pure: no Ray).

A schedule is a comma-separated list of points, taken in order:
- `N`     — once the running worker group has completed step N (a group resumed from an
            older checkpoint computes its way there again first);
- `Ns`    — once the running worker group has trained for N seconds (from its first step to
            its latest: a group that holds or restarts does not count);
- `start` — as soon as the next worker group has been placed (a notice while it starts).
At each point the driver names one spot node that hosts a worker of the running group; a
target that can preempt (the spot lab) interrupts it: a notice, Ray's drain, the kill at the
deadline. Each point after the first waits for a worker group started after the previous
point's interruption, so every point hits a different group and the count is exact whatever
the machine's speed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from workloads.elastic.progress import preempt_line

START = "start"
_SECONDS = re.compile(r"^(\d+(?:\.\d+)?)s$")


class ScheduleError(ValueError):
    """A schedule that cannot be read; the message says which point."""


@dataclass(frozen=True)
class Point:
    kind: str  # "step", "seconds" or "start"
    value: float = 0.0

    @property
    def text(self) -> str:
        if self.kind == "step":
            return str(int(self.value))
        if self.kind == "seconds":
            return f"{self.value:g}s"
        return START


def parse_schedule(text: str) -> tuple[Point, ...]:
    """`"120,start,10s"` → its points; an empty text is no schedule."""
    points = []
    for word in (part.strip() for part in text.split(",")) if text.strip() else ():
        seconds = _SECONDS.match(word)
        if word == START:
            points.append(Point(START))
        elif word.isdigit() and int(word) > 0:
            earlier = [point.value for point in points if point.kind == "step"]
            if earlier and int(word) <= max(earlier):
                raise ScheduleError(f"step {word} comes after step {max(earlier):g}: a run's "
                                    "steps only grow, so give step points in increasing order")
            points.append(Point("step", int(word)))
        elif seconds and float(seconds[1]) > 0:
            points.append(Point("seconds", float(seconds[1])))
        else:
            raise ScheduleError(f"{word!r} is not a point: give a step (120), seconds of "
                                f"training of a worker group (10s) or {START}")
    return tuple(points)


@dataclass(frozen=True)
class GroupView:
    """What the driver knows of the latest worker group."""

    group: int
    nodes: Sequence[str]
    """Ray node ids hosting its workers."""
    first_step_t: float | None
    """When it completed its first step (None: none yet)."""
    last_step_t: float | None = None
    """When it completed its latest step."""
    holding: bool = False
    """Its ranks hold at a checkpoint (a notice or a resize): a restart is coming."""
    steps_done: int = 0
    """The steps of the run's lineage it has reached (its highest step + 1; 0: none yet)."""


@dataclass
class Fired:
    point: Point
    index: int
    t: float
    group: int
    node: str
    steps_done: int


@dataclass
class Schedule:
    points: tuple[Point, ...]
    fired: list[Fired] = field(default_factory=list)

    @property
    def pending(self) -> Point | None:
        return self.points[len(self.fired)] if len(self.fired) < len(self.points) else None

    def due(self, group: GroupView | None, steps_done: int, now: float) -> bool:
        """Whether the next point has come, for the latest group and the run's progress."""
        point = self.pending
        if point is None or group is None:
            return False
        last = self.fired[-1] if self.fired else None
        if last is not None and group.group <= last.group:
            return False  # the group it interrupted is still the latest one
        if point.kind == START:
            return True
        if group.holding:
            return False  # it is about to restart: a point waits for a group that trains
        if point.kind == "step":
            return group.steps_done >= point.value
        if group.first_step_t is None or group.last_step_t is None:
            return False
        since = max(group.first_step_t, last.t if last else group.first_step_t)
        return group.last_step_t - since >= point.value

    def fire(self, group: GroupView, node: str, steps_done: int, now: float) -> Fired:
        point = self.pending
        assert point is not None
        fired = Fired(point, len(self.fired), now, group.group, node, steps_done)
        self.fired.append(fired)
        return fired


def spot_node_to_interrupt(group: GroupView, spot_nodes: Iterable[str],
                           interrupted: Iterable[str]) -> str | None:
    """A spot node hosting a worker of the group, not interrupted before, rank 0's last (Ray
    Train can commit a checkpoint without the preempted ranks only while rank 0 stays); None:
    the group runs on no such node, the point waits."""
    spot, done = set(spot_nodes), set(interrupted)
    return next((node for node in reversed(group.nodes) if node in spot and node not in done),
                None)


def fire_if_due(schedule: Schedule, view: GroupView, steps_done: int, spot_nodes: Iterable[str],
                now: float, record: Callable[[dict[str, Any]], None],
                say: Callable[[str], None],
                holder: Callable[[str], tuple[str, int]] | None = None) -> None:
    """If the next point has come for `view` (the run at `steps_done`), pick the spot node to
    interrupt, record the point (`record`: the run's `schedule` rows) and announce it (`say`:
    the line the lab's launcher acts on, progress.preempt_line). `holder` names what runs on
    a node (a kind and its number); without it, the view's worker group."""
    if not schedule.due(view, steps_done, now):
        return
    node = spot_node_to_interrupt(view, spot_nodes, (f.node for f in schedule.fired))
    if node is None:
        return
    fired = schedule.fire(view, node, steps_done, now)
    kind, number = holder(node) if holder else ("worker group", fired.group)
    record({"t": now, "point": fired.point.text, "index": fired.index, "group": number,
            "node_id": node, "steps_done": fired.steps_done})
    say(preempt_line(fired.index + 1, len(schedule.points), fired.point.text, node,
                     f"{kind} {number}", fired.steps_done))
