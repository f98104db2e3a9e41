"""The notice agent: beside Ray on every spot node, it drains its own Ray node at the spot
interruption notice, the same code on a spot lab node and in a spot pod on EKS.

    python -m workloads.common.notice_agent --gcs-address HOST:PORT
        (--node-ip IP | --node-manager-port PORT | both) [--name NAME] [--poll S]
        [--warning S] [--drain-on-rebalance] [--events FILE]

Every `--poll` seconds it asks the node's metadata service (workloads/common/spot_notice.py)
for an interruption notice and a rebalance recommendation. While a notice stands, every
alive Ray node at its address (`--node-ip`, `--node-manager-port`: the pod's IP on EKS, the
node's port on the lab, where all nodes share one IP) is drained through the GCS with reason
PREEMPTION and the deadline the timing budget (vocab/spot_budget.py) derives from the
notice's termination time, once per Ray node: Ray Train, Ray Data and Serve see the drain at
once, not when the node group's eviction gets round to SIGTERM. A rebalance recommendation
is recorded, and with `--drain-on-rebalance` drains the node too (deadline: as if the notice
came then). Every step is one JSON line on stdout and, with `--events`, appended to that
file (the spot lab's events.jsonl). It runs until SIGTERM or SIGINT.

The GCS side is Ray's private `GcsClient.drain_node` (what `ray drain-node` and `ray start`'s
SIGTERM handler call), reached through the seam (workloads/common/ray_private.py) by
RayNodeDrainer alone and pinned by a test against a real cluster
(tests/workloads/test_notice_agent.py): it takes the node id as HEX text; the binary id its
docstring asks for is accepted and drains nothing. The agent reads the cluster's token from
the file RAY_AUTH_TOKEN_PATH names, and will not start while that file is missing or empty.

Runs from the worker's image without the project installed: it imports the standard
library, Ray and the files of vocab/spot.py's NOTICE_AGENT_FILES only (a spot pod mounts
exactly those).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from vocab.spot import SPOT_WARNING_S
from vocab.spot_budget import BudgetError, lab_budget
from workloads.common import ray_private
from workloads.common.spot_notice import NoticeError, NoticeWatcher

DRAIN_RPC_TIMEOUT_S = 5.0
ERROR_REPEAT_S = 30.0
"""The same error is recorded again after this long at the earliest (a GCS that is down)."""
WARM_UP_EVERY_S = 1.0
"""Before any notice, how often the agent tries to reach the GCS and find its node until it
has (its node may join after it starts)."""
DEADLINE_TOLERANCE_S = 0.5
TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
CAUSE_NOTICE = "notice"
CAUSE_REBALANCE = "rebalance"


class Drainer(Protocol):
    """The GCS as the agent needs it."""

    def find_node(self, node_ip: str | None, node_manager_port: int | None) -> str | None:
        """The hex id of the alive Ray node at this address, None while there is none."""

    def drain(self, node_id: str, deadline_epoch_s: float, message: str) -> tuple[bool, str]:
        """Drain with reason PREEMPTION and this deadline: (accepted, why not)."""


class RayNodeDrainer:
    """Ray's GCS client, with the cluster's token from the file RAY_AUTH_TOKEN_PATH names (a
    spot pod mounts the cluster's Secret there; RAY_AUTH_MODE=token). The only place the
    agent touches Ray, through the seam (workloads/common/ray_private.py)."""

    def __init__(self, gcs_address: str, timeout_s: float = DRAIN_RPC_TIMEOUT_S) -> None:
        self.gcs_address = gcs_address
        self.timeout_s = timeout_s
        self._client: Any = None

    @property
    def client(self) -> Any:
        """Connected on first use: a pod's agent may start before the head does."""
        if self._client is None:
            self._client = ray_private.gcs_client(self.gcs_address)
        return self._client

    def find_node(self, node_ip: str | None, node_manager_port: int | None) -> str | None:
        for node in ray_private.alive_nodes(self.client, self.timeout_s):
            if node_ip is not None and node.ip != node_ip:
                continue
            if node_manager_port is not None and node.node_manager_port != node_manager_port:
                continue
            return node.node_id
        return None

    def drain(self, node_id: str, deadline_epoch_s: float, message: str) -> tuple[bool, str]:
        return ray_private.drain_for_preemption(self.client, node_id, deadline_epoch_s,
                                                message, self.timeout_s)


@dataclass
class NoticeAgent:
    """One poll at a time (`step`), or `run` until stopped."""

    watcher: NoticeWatcher
    drainer: Drainer
    node_ip: str | None
    node_manager_port: int | None
    poll_s: float
    warning_s: float = SPOT_WARNING_S
    drain_on_rebalance: bool = False
    name: str | None = None
    record: Callable[[dict[str, Any]], None] = print
    clock: Callable[[], float] = time.time
    notice_seen: float | None = None
    rebalance_seen: float | None = None
    drained: dict[str, float] = field(default_factory=dict)
    """Ray node id -> the deadline it was drained with (epoch seconds)."""
    found_node: bool = False
    """Whether the GCS has answered with this node once: the connection (and Ray's import)
    is warm, and a notice costs one lookup and one drain. Cold, they took seconds on a
    loaded machine, all of it between the notice and the drain."""
    _errors: dict[str, float] = field(default_factory=dict)
    _warm_up_at: float = float("-inf")

    def __post_init__(self) -> None:
        if self.node_ip is None and self.node_manager_port is None:
            raise ValueError("the agent needs its node's IP or node-manager port")
        self.budget = lab_budget(self.warning_s)

    def step(self) -> None:
        """Ask for a recommendation and a notice once; drain what they call for."""
        try:
            recommendation = self.watcher.check_rebalance()
            notice = self.watcher.check()
        except NoticeError as error:
            self._error("metadata", error)
            return
        now = self.clock()
        if recommendation is not None and self.rebalance_seen is None:
            self.rebalance_seen = now
            self._record("agent-rebalance", t=now,
                         recommended_at=recommendation.time.timestamp())
        if notice is not None and self.notice_seen is None:
            self.notice_seen = now
            self._record("agent-notice", t=now, action=notice.action,
                         termination_at=notice.time.timestamp())
        if notice is not None:
            self._drain(self.budget.drain_deadline(notice.time.timestamp()), CAUSE_NOTICE)
        elif recommendation is not None and self.drain_on_rebalance:
            self._drain(recommendation.time.timestamp() + self.budget.drain_timeout_s,
                        CAUSE_REBALANCE)
        elif not self.found_node and now - self._warm_up_at >= WARM_UP_EVERY_S:
            self._warm_up_at = now
            try:
                self.found_node = self.drainer.find_node(
                    self.node_ip, self.node_manager_port) is not None
            except Exception:  # noqa: BLE001 - the head not up yet: tried again later
                pass

    def _drain(self, deadline: float, cause: str) -> None:
        try:
            node_id = self.drainer.find_node(self.node_ip, self.node_manager_port)
        except Exception as error:  # noqa: BLE001 - a GCS that does not answer: next poll
            self._error("gcs", error)
            return
        if node_id is None:
            return  # no Ray node here (yet, or any more)
        earlier = self.drained.get(node_id)
        if earlier is not None and earlier <= deadline + DEADLINE_TOLERANCE_S:
            return  # drained already, by this deadline or an earlier one
        asked = self.clock()
        try:
            accepted, why_not = self.drainer.drain(
                node_id, deadline, f"spot {cause}: the instance is reclaimed; drain by the "
                                   f"deadline ({self.name or 'notice agent'})")
        except Exception as error:  # noqa: BLE001
            self._error("drain", error)
            return
        done = self.clock()
        self._record("agent-drain", t=done, ray_node_id=node_id, cause=cause,
                     deadline=deadline, accepted=accepted, rejection=why_not or None,
                     asked_at=asked, rpc_s=round(done - asked, 4))
        if accepted:
            self.drained[node_id] = deadline

    def run(self, stop: threading.Event) -> None:
        self._record("agent-start", t=self.clock(), endpoint=self.watcher.endpoint,
                     node_ip=self.node_ip, node_manager_port=self.node_manager_port,
                     poll_s=self.poll_s, drain_on_rebalance=self.drain_on_rebalance)
        while not stop.is_set():
            self.step()
            stop.wait(self.poll_s)

    def _record(self, event: str, **details: Any) -> None:
        self.record({"t": details.pop("t"), "event": event, "node": self.name, **details})

    def _error(self, what: str, error: Exception) -> None:
        now = self.clock()
        if now - self._errors.get(what, float("-inf")) >= ERROR_REPEAT_S:
            self._errors[what] = now
            self._record("agent-error", t=now, what=what,
                         error=f"{type(error).__name__}: {error}"[:300])


def line_recorder(events: Path | None) -> Callable[[dict[str, Any]], None]:
    """Each record as one JSON line on stdout and, given a file, appended to it (one write
    per line: the lab's supervisor appends to the same file)."""

    def record(row: dict[str, Any]) -> None:
        line = json.dumps(row) + "\n"
        sys.stdout.write(line)
        sys.stdout.flush()
        if events is not None:
            with events.open("a") as out:
                out.write(line)

    return record


def token_file_problem(environ: Mapping[str, str]) -> str | None:
    """What keeps the agent from reading the Ray token at RAY_AUTH_TOKEN_PATH (unset: Ray
    finds the token as it does for any process), None when nothing: found at start, not when
    the first notice's drain is refused."""
    path = environ.get(TOKEN_PATH_ENV)
    if not path:
        return None
    try:
        token = Path(path).read_text()
    except OSError as error:
        return f"{TOKEN_PATH_ENV}={path}: the Ray token cannot be read ({error.strerror})"
    return None if token.strip() else f"{TOKEN_PATH_ENV}={path}: the Ray token file is empty"


def parser() -> argparse.ArgumentParser:
    default_poll = lab_budget(SPOT_WARNING_S).poll_s
    made = argparse.ArgumentParser(
        prog="python -m workloads.common.notice_agent",
        description="Drain this spot node's Ray node at its interruption notice.")
    made.add_argument("--gcs-address", required=True, help="the Ray head's GCS, HOST:PORT")
    made.add_argument("--node-ip", help="this node's Ray address (a pod's IP)")
    made.add_argument("--node-manager-port", type=int,
                      help="this node's raylet port (when nodes share an IP)")
    made.add_argument("--name", help="this node's name in the records")
    made.add_argument("--warning", type=float, default=SPOT_WARNING_S,
                      help="seconds from a notice to the termination: the timing budget is "
                           f"AWS's scaled to it (default: {SPOT_WARNING_S:g})")
    made.add_argument("--poll", type=float, default=None,
                      help=f"seconds between polls (default: the budget's, {default_poll:g} "
                           "on AWS)")
    made.add_argument("--drain-on-rebalance", action="store_true",
                      help="also drain at a rebalance recommendation")
    made.add_argument("--events", type=Path, help="also append each record to this file")
    return made


def main(argv: list[str] | None = None) -> int:
    made = parser()
    args = made.parse_args(argv)
    if args.node_ip is None and args.node_manager_port is None:
        made.error("give --node-ip, --node-manager-port or both")
    try:
        budget = lab_budget(args.warning)
    except (BudgetError, ZeroDivisionError):
        made.error(f"--warning: {args.warning:g} s is too short for the timing budget")
    poll_s = budget.poll_s if args.poll is None else args.poll
    if not poll_s > 0:
        made.error(f"--poll must be > 0, got {poll_s:g}")
    if (problem := token_file_problem(os.environ)) is not None:
        print(f"notice agent: {problem}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    agent = NoticeAgent(NoticeWatcher(timeout_s=max(min(poll_s, 2.0), 0.5)),
                        RayNodeDrainer(args.gcs_address), args.node_ip,
                        args.node_manager_port, poll_s, warning_s=args.warning,
                        drain_on_rebalance=args.drain_on_rebalance, name=args.name,
                        record=line_recorder(args.events))
    agent.run(stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
