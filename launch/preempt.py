"""Real spot interruptions on a deployed stack, through AWS FIS, and what became of each.

- `preempt(stack, pool, count)` (`invoke preempt`): start the pool's experiment template
  `count` times now; each start interrupts one running spot instance of the pool (a
  rebalance recommendation and the two-minute notice, then the end).
- `StackSchedule`: a run's `--preemptions` schedule carried out on a stack while the run
  lasts: the same interruption times the spot lab would use (vocab/preemptions.py; the lab's
  Markov chain, price trace or explicit times, spotlab/capacity.py), each one FIS start.
- `RayNodeWatcher`: Ray's node table as the run's dashboard shows it (the lab's or, through
  the port-forward, the stack's), polled while the run lasts: when each node joined and
  ended, and whether Ray drained it for a preemption first.
- `stack_preemption_records`: <out>/stack/preemptions.jsonl rows (the fields of a lab run's
  spotlab/preemptions.jsonl, spotlab/report.py) from the experiments and the watched node
  table; `stack_preemptions` does all of this around a run (launch/targets.py).

FIS picks the instance itself, among the pool's running spot instances: a pool shared by
several experiments' RayClusters may lose a node of another one. An experiment's interrupted
node is the first node of the run's cluster that Ray lists ended within the
warning after the experiment's action started.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launch.options import AwsStackOptions
from stacks.config_types import NODE_POOLS
from stacks.outputs import REGION, read_interruption_templates
from vocab.errors import RunFailed, UserError
from vocab.preemptions import (
    CAUSE_NOTICE,
    NONE,
    PREEMPTION_RECORD,
    RECORD_FIELDS,
    preemption_record,
)
from vocab.spot import SPOT_WARNING_S
from workloads.common.options import OptionSpec, option

if TYPE_CHECKING:
    from spotlab.config import SpotLabConfig

LOOKAHEAD_S = 60.0
"""How far ahead the schedule's next times are computed at a time."""
WATCH_POLL_S = 2.0
PREEMPTED_MESSAGE = "Terminated due to preemption"
"""How Ray's state API begins the end of a node drained with reason PREEMPTION."""
MATCH_SLACK_S = 30.0
"""Past the warning, how late a node's end still counts as the interruption's (Ray lists a
node dead some seconds after it is gone)."""
EXPERIMENT_TAG = "spotburst:run"
STACK_RECORD = "stack"
"""<out>/stack/: what a run's schedule did on a stack (its preemptions.jsonl and experiments)."""


@dataclass(frozen=True, kw_only=True)
class PreemptOptions(AwsStackOptions):
    """`invoke preempt`: which stack, which spot pool, how many instances."""

    pool: str = option("spot-cpu", "the spot node pool whose running instances to interrupt, "
                                   "by its AWS name or its config key (the dev stack's: "
                                   "spot-cpu or spotCpu, spot-gpu or spotGpu)")
    count: int = option(1, "instances to interrupt now: one FIS experiment each, FIS picks "
                           "the instance", minimum=1, maximum=100)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pool in NODE_POOLS:  # the config's key (`spotCpu`) names the pool too
            object.__setattr__(self, "pool", NODE_POOLS[self.pool].name)


PREEMPT_SPEC = OptionSpec(PreemptOptions)


class PreemptError(UserError, ValueError):
    """A pool without a template, a stack without templates: one line naming the flag."""


class TemplateMissing(PreemptError):
    """The stack names a template that AWS does not have (destroyed outside Pulumi?)."""


@dataclass(frozen=True)
class Started:
    """One FIS experiment this launcher started."""

    pool: str
    template_id: str
    experiment_id: str
    scheduled_at: float
    started_at: float


class FisInterrupter:
    """Starts a stack's spot pools' experiment templates: one interrupted instance per
    start."""

    def __init__(self, stack: str, templates: dict[str, str], client: Any,
                 clock: Callable[[], float] = time.time, run_label: str | None = None) -> None:
        self.stack = stack
        self.templates = dict(templates)
        self.client = client
        self.clock = clock
        self.run_label = run_label or f"preempt-{uuid.uuid4().hex[:8]}"

    @classmethod
    def for_stack(cls, stack: str, outputs: dict[str, Any] | None = None,
                  endpoint_url: str | None = None, client: Any = None) -> FisInterrupter:
        """From the stack's outputs (`pulumi stack output`): its templates and region."""
        if outputs is None:
            from launch.pulumi_cli import stack_outputs

            outputs = stack_outputs(stack)
        templates = read_interruption_templates(outputs, stack)
        if client is None:
            from workloads.common.aws_client import aws_client

            client = aws_client("fis", region=str(outputs.get(REGION) or ""),
                                endpoint_url=endpoint_url)
        return cls(stack, templates, client)

    def template(self, pool: str) -> str:
        if pool not in self.templates:
            raise PreemptError(f"--pool: stack {self.stack!r} has no interruption template for "
                               f"{pool!r} (its spot pools: {', '.join(sorted(self.templates))})")
        return self.templates[pool]

    def interrupt(self, pool: str, count: int = 1, scheduled_at: float | None = None
                  ) -> list[Started]:
        """Start the pool's template `count` times (FIS picks each instance)."""
        from botocore.exceptions import ClientError

        template = self.template(pool)
        started = []
        for _ in range(count):
            try:
                reply = self.client.start_experiment(
                    clientToken=str(uuid.uuid4()), experimentTemplateId=template,
                    tags={EXPERIMENT_TAG: self.run_label})
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                    raise TemplateMissing(
                        f"--pool: stack {self.stack!r}'s interruption template {template} for "
                        f"{pool!r} does not exist in AWS (deleted outside Pulumi? `invoke up` "
                        "declares it again)") from None
                raise
            now = self.clock()
            started.append(Started(pool, template, reply["experiment"]["id"],
                                   now if scheduled_at is None else scheduled_at, now))
        return started


def preempt(options: PreemptOptions, outputs: dict[str, Any] | None = None,
            client: Any = None) -> list[Started]:
    """`invoke preempt`: interrupt `count` running spot instances of the pool now."""
    interrupter = FisInterrupter.for_stack(options.stack, outputs, options.endpoint_url, client)
    return interrupter.interrupt(options.pool, options.count)


def format_started(started: list[Started]) -> str:
    lines = [f"started FIS experiment {one.experiment_id} on pool {one.pool} (template "
             f"{one.template_id}): one running spot instance gets its rebalance "
             "recommendation and two-minute notice now" for one in started]
    return "\n".join(lines)


def _daemon(target: Callable[[], None], name: str) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


def _halt(stop: threading.Event, thread: threading.Thread | None) -> None:
    stop.set()
    if thread is not None:
        thread.join(timeout=30)


# --- a run's schedule on a stack ------------------------------------------------------------


def schedule_points(config: SpotLabConfig, pools: Sequence[str]) -> Iterator[tuple[float, str]]:
    """(seconds after the run's start, pool) of every interruption of the lab's schedule, in
    time order: an explicit schedule's times, or the lab's model's without end (the chain
    and the trace go on). The interruption of spot slot k goes to pools[k % len(pools)], an
    explicit time to the pools in turn."""
    from spotlab.capacity import SpotCapacity

    if not pools:
        raise PreemptError("--preemptions: the stack has no spot pool to interrupt")
    capacity = SpotCapacity(config)
    if capacity.model is None:
        times = config.schedule().times_s
        for turn, interruption in enumerate(capacity.interruptions_between(0.0, max(times,
                                                                               default=0.0))):
            yield interruption.t, pools[turn % len(pools)]
        return
    if capacity.model == "markov" and config.alpha >= 1.0:
        return  # α = 1: never
    start = quiet_since = 0.0
    while True:
        found = capacity.interruptions_between(start, start + LOOKAHEAD_S)
        for interruption in found:
            assert interruption.slot is not None
            yield interruption.t, pools[interruption.slot % len(pools)]
        start += LOOKAHEAD_S
        if found:
            quiet_since = start
        elif capacity.model == "trace" and start - quiet_since > capacity.replay.loop_s:
            return  # a whole loop of the trace without a price above the bid: never
        elif capacity.capacity is not None and start - quiet_since > \
                capacity.capacity.trace.span_s / capacity.capacity.compression:
            return  # a whole loop of the capacity trace without a fall: never


class StackSchedule:
    """A schedule carried out on a stack: a thread starts one FIS experiment at each point
    (seconds after `start`), until the schedule ends or `stop()`. A start that fails (no
    running instance of the pool, a quota) is recorded as missed; the run goes on."""

    def __init__(self, interrupter: FisInterrupter, points: Iterable[tuple[float, str]],
                 clock: Callable[[], float] = time.time) -> None:
        self.interrupter = interrupter
        self.points = iter(points)
        self.clock = clock
        self.started: list[Started] = []
        self.missed: list[dict[str, Any]] = []
        self.start_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, start_at: float | None = None) -> StackSchedule:
        self.start_at = self.clock() if start_at is None else start_at
        self._thread = _daemon(self._run, "stack-schedule")
        return self

    def stop(self) -> None:
        _halt(self._stop, self._thread)

    def wait(self, timeout_s: float) -> bool:
        """Until the schedule has run out (True) or `timeout_s` passed (False)."""
        assert self._thread is not None
        self._thread.join(timeout=timeout_s)
        return not self._thread.is_alive()

    def __enter__(self) -> StackSchedule:
        return self if self._thread is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        for offset, pool in self.points:
            due = self.start_at + offset
            if self._stop.wait(max(0.0, due - self.clock())):
                return
            try:
                self.started += self.interrupter.interrupt(pool, scheduled_at=due)
            except (ClientError, BotoCoreError, UserError) as error:
                self.missed.append({"scheduled_at": due, "pool": pool,
                                    "error": " ".join(str(error).split())})


def describe_experiments(client: Any, started: Iterable[Started]) -> list[dict[str, Any]]:
    """What FIS says of each started experiment: its status, when its action started (the
    notice) and ended, and the instances it interrupted."""
    described = []
    for one in started:
        experiment = client.get_experiment(id=one.experiment_id)["experiment"]
        actions = list((experiment.get("actions") or {}).values())
        instances: list[str] = []
        token: str | None = None
        while True:
            page = client.list_experiment_resolved_targets(
                experimentId=one.experiment_id, **({"nextToken": token} if token else {}))
            instances += [str(target.get("targetInformation", {}).get("arn", "")).rsplit("/", 1)[-1]
                          for target in page.get("resolvedTargets", [])]
            token = page.get("nextToken")
            if not token:
                break
        described.append({
            **asdict(one),
            "status": experiment["state"]["status"],
            "reason": experiment["state"].get("reason"),
            "action_started_at": _epoch(actions[0].get("startTime")) if actions else None,
            "action_ended_at": _epoch(actions[0].get("endTime")) if actions else None,
            "instance_ids": [i for i in instances if i],
        })
    return described


def _epoch(stamp: Any) -> float | None:
    return stamp.timestamp() if isinstance(stamp, datetime) else None


# --- Ray's node table, watched --------------------------------------------------------------


@dataclass
class NodeSeen:
    """One Ray node as the watcher saw it (epoch seconds)."""

    node_id: str
    labels: dict[str, str]
    started_at: float | None
    first_seen_at: float
    ended_at: float | None = None
    state_message: str | None = None
    """Ray's word on its end: "Terminated due to preemption: ..." after a drain with reason
    PREEMPTION (the notice agent's), "Unexpected termination: ..." without one."""
    is_head: bool = False

    @property
    def drained_for_preemption(self) -> bool:
        return (self.state_message or "").startswith(PREEMPTED_MESSAGE)


@dataclass
class RayNodeWatcher:
    """Polls `GET <dashboard>/api/v0/nodes?detail=1` (with the cluster's token) every
    `poll_s` from a thread: each node's start, and its end with Ray's reason. Ray's state API
    does not list a draining node as such (its columns leave the drain out): when the drain
    began is the notice agent's record, not the node table's; the end says whether there
    was one."""

    address: str
    token: str | None = None
    poll_s: float = WATCH_POLL_S
    clock: Callable[[], float] = time.time
    nodes: dict[str, NodeSeen] = field(default_factory=dict)
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def poll(self) -> None:
        request = urllib.request.Request(
            self.address.rstrip("/") + "/api/v0/nodes?detail=1&limit=10000",
            headers={"Authorization": f"Bearer {self.token}"} if self.token else {})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=max(self.poll_s, 5.0)) as response:
                listed = json.loads(response.read())["data"]["result"]["result"]
        except (urllib.error.URLError, TimeoutError, ConnectionError, KeyError, ValueError):
            self.errors += 1
            return
        now = self.clock()
        for info in listed:
            self._see(info, now)

    def _see(self, info: dict[str, Any], now: float) -> None:
        node_id = str(info["node_id"])
        seen = self.nodes.get(node_id)
        if seen is None:
            start_ms = int(info.get("start_time_ms") or 0)
            seen = self.nodes[node_id] = NodeSeen(
                node_id, dict(info.get("labels") or {}), start_ms / 1000 if start_ms else None,
                now, is_head=bool(info.get("is_head_node")))
        if info.get("state") == "DEAD" and seen.ended_at is None:
            end_ms = int(info.get("end_time_ms") or 0)
            seen.ended_at = end_ms / 1000 if end_ms else now
            seen.state_message = info.get("state_message")

    def start(self) -> RayNodeWatcher:
        def run() -> None:
            while not self._stop.is_set():
                self.poll()
                self._stop.wait(self.poll_s)

        self._thread = _daemon(run, "ray-node-watcher")
        return self

    def stop(self) -> None:
        _halt(self._stop, self._thread)
        self.poll()  # the last word: who ended meanwhile

    def __enter__(self) -> RayNodeWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- records ----------------------------------------------------------------------------------


def stack_preemption_records(experiments: list[dict[str, Any]], nodes: Iterable[NodeSeen],
                             warning_s: float = SPOT_WARNING_S) -> list[dict[str, Any]]:
    """stack/preemptions.jsonl rows from the experiments (describe_experiments) and the
    watched node table: one row per experiment that reached its action. Its node is the
    first worker of the run's cluster that Ray lists ended within the
    warning after the notice (none: FIS hit an instance without a node of this run); its
    replacement the first worker that joined after it, not already another's."""
    workers = sorted((n for n in nodes if not n.is_head),
                     key=lambda n: n.ended_at or float("inf"))
    taken: set[str] = set()
    replacements: set[str] = set()
    rows = []
    for experiment in sorted(experiments, key=lambda e: e["started_at"]):
        notice = experiment.get("action_started_at")
        if notice is None:
            continue  # FIS never acted: no instance, no notice (see the run's missed list)
        window = notice + warning_s + MATCH_SLACK_S
        node = next((n for n in workers if n.node_id not in taken
                     and notice - 1.0 <= (n.ended_at or float("inf")) <= window), None)
        replacement = None
        if node is not None:
            taken.add(node.node_id)
            replacement = next((n for n in sorted(nodes, key=lambda n: n.started_at or 0.0)
                                if not n.is_head and n.node_id not in replacements
                                and n.node_id != node.node_id and n.started_at is not None
                                and n.started_at > notice), None)
            if replacement is not None:
                replacements.add(replacement.node_id)
        instances = experiment.get("instance_ids") or []
        rows.append(preemption_record(
            scheduled_at=experiment["scheduled_at"],
            # FIS sends the rebalance recommendation with the notice
            rebalance_at=notice,
            notice_at=notice,
            drain_seen_at=None,  # not in Ray's node table (RayNodeWatcher)
            gone_at=(node.ended_at if node else None) or experiment.get("action_ended_at"),
            replacement_joined_at=replacement.started_at if replacement else None,
            cause=CAUSE_NOTICE,
            node=instances[0] if instances else None,
            ray_node_id=node.node_id if node else None,
            pool=experiment["pool"],
            instance_id=instances[0] if instances else None,
        ))
    return rows


def write_preemption_records(folder: Path, rows: list[dict[str, Any]],
                             also: dict[str, Any] | None = None) -> Path:
    """<folder>/stack/preemptions.jsonl, one row per line, every field present (the fields of
    a lab run's spotlab/preemptions.jsonl); `also` (the experiments, the missed starts) in
    <folder>/stack/experiments.json."""
    for row in rows:
        if tuple(row) != RECORD_FIELDS:
            raise RunFailed(f"a preemption record with fields {sorted(row)} is not one")
    path = folder / STACK_RECORD / f"{PREEMPTION_RECORD}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))
    if also is not None:
        (path.parent / "experiments.json").write_text(json.dumps(also, indent=1,
                                                                 sort_keys=True) + "\n")
    return path


def scheduled(config: SpotLabConfig | None) -> bool:
    """Whether a run's `--preemptions` asks a stack for interruptions: given, and not none
    (not given, the cloud preempts as it will)."""
    return config is not None and config.preemptions not in (None, NONE)


@contextmanager
def stack_preemptions(stack: str, config: SpotLabConfig | None, address: str,
                      token: str | None, folder: Path, show: Callable[[str], None],
                      outputs: dict[str, Any] | None = None, client: Any = None,
                      poll_s: float = WATCH_POLL_S) -> Iterator[StackSchedule | None]:
    """A run's `--preemptions` carried out on `stack` while the body runs (nothing without
    one): one FIS experiment at each of the schedule's times after the start, Ray's node
    table watched through `address` (the run's port-forwarded dashboard), then the records
    in <folder>/stack/ made of what FIS did and Ray saw. Yields the running schedule."""
    if not scheduled(config):
        yield None
        return
    assert config is not None
    interrupter = FisInterrupter.for_stack(stack, outputs, client=client)
    interrupter.run_label = f"run-{folder.name}"
    points = schedule_points(config, sorted(interrupter.templates))
    show(f"preemptions: {config.preemptions} carried out on stack {stack!r} through AWS FIS "
         f"(pools {', '.join(sorted(interrupter.templates))})")
    watcher = RayNodeWatcher(address, token, poll_s=poll_s)
    schedule = StackSchedule(interrupter, points)
    try:
        with watcher, schedule:
            yield schedule
    finally:
        experiments = describe_experiments(interrupter.client, schedule.started)
        rows = stack_preemption_records(experiments, watcher.nodes.values())
        path = write_preemption_records(folder, rows, {
            "schedule": config.preemptions, "experiments": experiments,
            "missed": schedule.missed})
        show(f"preemptions: {len(schedule.started)} FIS experiments started, "
             f"{len(schedule.missed)} missed, {len(rows)} interruptions recorded in {path}")
