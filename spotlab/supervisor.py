"""The spot lab's supervisor: `python -m spotlab LAB_ID`, one process per lab.

It starts the lab's Ray nodes (one `ray start --block` each, a notice endpoint each, and
beside every spot node its notice agent, workloads/common/notice_agent.py, as on a spot pod):
the head, then every other node at once; a node whose `ray start` gives up is started again
(START_ATTEMPTS), and a lab that cannot come up ends with FAILED_LINE and why. Then it
carries out the preemption schedule (spotlab/capacity.py) until SIGTERM, then removes every
node. On a preemption of a spot node: its endpoint shows the notice; its agent sees it and
drains the node through the GCS (reason PREEMPTION, the deadline of the timing budget,
vocab/spot_budget.py): the supervisor itself only serves the notice and, at the deadline,
kills whatever is left of the node, as the instance's end; once capacity is back and the
replacement delay has passed a new node joins in its slot.

Rebalance recommendations (`rebalance_chance` > 0): the schedule is known ahead, so a share
of its interruptions is announced `rebalance_lead_s` early on the node's endpoint; the node
group's answer is modelled as EKS's: a replacement starts at once (into other capacity: the
slot's coming outage does not hit it), and once it has joined the old node is drained as a
pod eviction does it (SIGTERM to its `ray start`: Ray's drain for the budget's drain timeout)
and ends within the pod's grace period, unless its notice came first.

Every step is an event in `events.jsonl` in the lab's temp dir, with its wall time `t`
(epoch seconds); the agents append theirs (`agent-*`) to the same file.

It reads the node table and the draining nodes from the GCS (with the lab's token, not as a
driver), and it owns every node process: it stops a node's `ray start` by its handle and
what is left of the node by the node's marker, nothing else. The state file holds the live
nodes only (a node leaves it once its processes are gone). The lab's starter (spotlab.lab)
only spawns it and waits for READY_LINE (or FAILED_LINE).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

import procs
from netem.ports import free_local_ports
from procs import MARKER_ENV
from spotlab.capacity import Interruption, SpotCapacity
from spotlab.config import NodeSpec, SpotLabConfig
from spotlab.endpoint import NoticeEndpoint
from spotlab.state import load_state, node_marker, ports_of_other_labs, save_state
from vocab.errors import RunFailed, one_line
from vocab.ports import RayPorts
from vocab.preemptions import CAUSE_NOTICE, CAUSE_REBALANCE
from vocab.shared_data import SHARED_ENV
from vocab.spot import (
    IMDS_ENDPOINT_ENV,
    NOTICE_AGENT_MODULE,
    POOL_HEAD,
    POOL_SPOT,
    node_labels,
    placement_resources,
)
from workloads.common.deadline import DeadlineExceeded, call_within
from workloads.common.spot_market.billing import Meter

READY_LINE = "spotlab supervisor: lab is up"
FAILED_LINE = "spotlab supervisor: lab failed:"
"""The supervisor's last line when the lab did not come up, then why in a few words."""
TICK_S = 0.1
GCS_READ_S = 10.0
"""The longest one read of the GCS may hold the loop (a node's end is seen without it)."""
SAVE_EVERY_S = 2.0
NODE_START_TIMEOUT_S = 120.0
"""From a node's start to its join, per attempt."""
START_ATTEMPTS = 3
GONE_FORGOTTEN_S = 30.0
"""A gone node is dropped from memory once Ray lists it dead, or this long after it went."""
DRAIN_TIMEOUT_ENV = "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"
REBALANCE_SEED = 104729
"""Mixed into the lab's seed for the rebalance draws and the choice of node an explicit
schedule interrupts: the chains' own draws stay what they were."""

SLOW_MACHINE_RAY_CONFIG = {
    # The raylet gives its dashboard agent 30 s to register (then the node dies): a loaded
    # 2-core machine starting several nodes at once can miss that.
    "RAY_agent_register_timeout_ms": "180000",
}
"""Ray's own start-up timeouts, raised for a lab whose nodes start together on a busy
machine. Not configurable in Ray 2.60: `ray start` gives a node 30 s from its raylet's start
to its registration in the GCS (ray/_private/node.py, `raylet_start_wait_time_s = 30`), then
exits; the supervisor starts such a node again (START_ATTEMPTS)."""
NO_METRICS_EXPORT = {"RAY_enable_metrics_collection": "0"}
"""No Prometheus metrics server per node: it would listen on every interface without a token
(the lab uses none of Ray's metrics)."""


def lab_env(temp_dir: Path) -> dict[str, str]:
    """Token auth with the lab's own token, for its nodes and for any driver of it."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(temp_dir / "ray_auth_token")}


WORKER_PORT_RANGE = ("min_worker", "max_worker")


def node_ports(taken: set[int]) -> RayPorts:
    """Free loopback ports for every fixed port of a node, none of them in `taken` (the
    ports of nodes started meanwhile, which may not be bound yet); workers take random
    ones."""
    roles = [item.name for item in fields(RayPorts) if item.name not in WORKER_PORT_RANGE]
    chosen = free_local_ports(len(roles), taken)
    return RayPorts(**dict(zip(roles, chosen, strict=True)), min_worker=0, max_worker=0)


def ray_node_argv(spec: NodeSpec, ports: RayPorts, *, head_address: str, temp_dir: Path,
                  object_store_mb: int, dashboard: bool = True) -> list[str]:
    """`ray start --block` for one lab node: its pool's labels and placement resources."""
    labels = ",".join(f"{key}={value}" for key, value in node_labels(spec.pool).items())
    argv = [str(Path(sys.executable).with_name("ray")), "start", "--block"]
    if spec.pool == POOL_HEAD:
        argv += [f"--port={ports.gcs}", "--head",
                 f"--ray-client-server-port={ports.client_server}"]
        argv += ["--dashboard-host=127.0.0.1", f"--dashboard-port={ports.dashboard}"] \
            if dashboard else ["--include-dashboard=false"]
    else:
        argv.append(f"--address={head_address}")
    return argv + [
        "--node-ip-address=127.0.0.1",
        f"--num-cpus={spec.num_cpus}",
        "--num-gpus=0",
        f"--resources={json.dumps(placement_resources(spec.pool, spec.num_cpus))}",
        f"--labels={labels}",
        f"--object-store-memory={object_store_mb << 20}",
        f"--temp-dir={temp_dir / spec.name}",
        f"--node-manager-port={ports.node_manager}",
        f"--object-manager-port={ports.object_manager}",
        f"--dashboard-agent-grpc-port={ports.dashboard_agent_grpc}",
        f"--dashboard-agent-listen-port={ports.dashboard_agent_http}",
        f"--runtime-env-agent-port={ports.runtime_env_agent}",
        f"--metrics-export-port={ports.metrics_export}",
        "--min-worker-port=0",
        "--max-worker-port=0",
        "--disable-usage-stats",
    ]


@dataclass(frozen=True)
class RayNodes:
    """Ray's node table as the supervisor reads it: a node joins when an alive entry has its
    node-manager port; it is dead when the entry with its node id says so. A replacement may
    reuse a dead node's port, so a port never tells whose death an entry reports."""

    alive_by_port: dict[int, dict[str, Any]]
    alive_by_id: dict[str, bool]

    @classmethod
    def of(cls, table: list[dict[str, Any]]) -> RayNodes:
        return cls(
            alive_by_port={int(info["NodeManagerPort"]): info for info in table if info["Alive"]},
            alive_by_id={str(info["NodeID"]): bool(info["Alive"]) for info in table},
        )

    def dead(self, ray_id: str) -> bool:
        """Listed dead (a node missing from the table counts as alive: the table keeps dead
        nodes, and one read may be incomplete)."""
        return self.alive_by_id.get(ray_id) is False


@dataclass
class Node:
    spec: NodeSpec
    ports: RayPorts
    endpoint: NoticeEndpoint
    process: subprocess.Popen[str]
    started_at: float
    replaces: str | None = None
    attempt: int = 1
    agent: subprocess.Popen[str] | None = None
    """The notice agent beside a spot node."""
    agent_exited: bool = False
    ray_id: str | None = None
    joined_at: float | None = None
    notice_at: float | None = None
    deadline: float | None = None
    drain_seen_at: float | None = None
    exited_at: float | None = None
    dead_at: float | None = None
    killed_at: float | None = None
    rebalance_at: float | None = None
    rebalance_replacement: str | None = None
    """The node the node group started when this one got its rebalance recommendation."""
    ending: str | None = None
    """Why the node is ending: CAUSE_NOTICE (its notice's deadline) or CAUSE_REBALANCE (the
    node group drains it after its replacement joined); None while it is not."""
    exempt: bool = False
    """Started into other capacity after a rebalance recommendation: the slot's current
    outage does not preempt it (cleared once the slot's capacity is back)."""

    @property
    def gone(self) -> bool:
        """The instance is gone: killed (at its deadline, or by the node group), or ended by
        itself."""
        return self.killed_at is not None or (self.exited_at is not None
                                              and self.ending is None)

    @property
    def preemptible(self) -> bool:
        """A spot node that has joined and is not ending: what an interruption may hit."""
        return (self.spec.slot is not None and self.ray_id is not None and self.ending is None
                and self.exited_at is None)


class Supervisor:
    def __init__(self, lab_id: str) -> None:
        self.state = load_state(lab_id)
        self.lab_id = lab_id
        self.config = SpotLabConfig.from_dict(self.state["config"])
        self.temp_dir = Path(self.state["temp_dir"])
        self.events_path = self.temp_dir / "events.jsonl"
        self.interrupts_dir = self.temp_dir / "interrupts"
        self.capacity = SpotCapacity(self.config)
        self.budget = self.config.budget()
        self.draws = np.random.default_rng([self.config.seed, REBALANCE_SEED])
        self.scheduled_to = 0.0  # lab time up to which the schedule's interruptions are done
        self.looked_to = 0.0  # lab time up to which rebalance recommendations are decided
        self.outage_since: dict[int, float] = {}  # slot -> when its capacity went (epoch)
        self.reserved: dict[tuple[float, int], str] = {}  # interruption -> node it will hit
        self.meter = Meter(self.config.on_demand_price)
        self.nodes: dict[str, Node] = {}
        self.vacant: dict[int, tuple[float, str]] = {}  # slot -> (since, node it replaces)
        self.next_spot = self.config.spot
        self.head_address = ""
        self.up_at = 0.0
        self.gcs: Any = None
        self.head_lost = False  # its `ray start` ended: the GCS is gone, never asked again
        self.lock = threading.RLock()  # the loop's tick vs a node's kill at its deadline
        self.kill_guard = threading.Lock()
        self.stopping = False
        self.saved_at = 0.0
        self.state["supervisor_pid"] = os.getpid()
        self._save()

    # --- start-up ---------------------------------------------------------------------------

    def start(self) -> None:
        """The head, then every other node at once (they start on the head's GCS, which
        must be up first); a node whose `ray start` gives up is started again."""
        specs = self.config.nodes()
        head = self._start_node(specs[0])
        self.head_address = f"127.0.0.1:{head.ports.gcs}"
        self._await_joins([head.spec], connect=True)
        for spec in specs[1:]:
            self._start_node(spec)
        self._await_joins(specs[1:], connect=False)
        self.up_at = time.time()
        self.meter.billed_to = self.up_at
        for node in self.nodes.values():
            assert node.joined_at is not None
            self._event("join", node, replaces=None,
                        start_to_join_s=node.joined_at - node.started_at,
                        attempts=node.attempt, pid=node.process.pid,
                        notice_endpoint=node.endpoint.url)
        self.state["up"] = True
        self.state["up_at"] = self.up_at
        self.state["description"] = {
            "ray_address": self.head_address,
            "dashboard_url": f"http://127.0.0.1:{head.ports.dashboard}"
            if self.config.dashboard else None,
            "driver_env": {**lab_env(self.temp_dir), **self._shared_env(),
                           "RAY_ADDRESS": self.head_address},
            "events": str(self.events_path),
        }
        self._save()
        print(READY_LINE, flush=True)

    def _await_joins(self, specs: list[NodeSpec], *, connect: bool) -> None:
        """Until every node of `specs` is in Ray's node table (with `connect`: the head,
        whose `ray start` says so first; the GCS client connects then). A node whose
        `ray start` ends first, or that has not joined within NODE_START_TIMEOUT_S, is
        started again, up to START_ATTEMPTS times; then StartFailed names it and the gist of
        its log."""
        waiting = {spec.name for spec in specs}
        while waiting:
            if connect and self.gcs is None:
                head = self.nodes[specs[0].name]
                if "Ray runtime started" in self._log(head.spec.name).read_text(
                        errors="replace"):
                    self._connect()
            if self.gcs is not None:
                self._watch_joins(self._ray_nodes(), record=False)
            for name in sorted(waiting):
                node = self.nodes[name]
                if node.ray_id is not None:
                    waiting.discard(name)
                    continue
                ended = node.process.poll() is not None
                late = time.time() - node.started_at > NODE_START_TIMEOUT_S
                if not (ended or late):
                    continue
                why = (f"exited {node.process.returncode}" if ended
                       else f"did not join within {NODE_START_TIMEOUT_S:g} s")
                gist = procs.log_gist(self._log(name))
                if node.attempt >= START_ATTEMPTS:
                    raise StartFailed(f"node {name} {why} (attempt {node.attempt} of "
                                      f"{START_ATTEMPTS}): {gist}")
                say(f"node {name} {why}: {gist}; starting it again")
                self._event("start-retry", node, why=why, gist=gist)
                self._stop_node(node, grace_s=5.0)
                node.endpoint.close()
                self._forget(node)
                again = self._start_node(node.spec, replaces=node.replaces,
                                         attempt=node.attempt + 1)
                if node.spec.pool == POOL_HEAD:  # a new GCS, on new ports
                    self._disconnect()
                    self.head_address = f"127.0.0.1:{again.ports.gcs}"
            time.sleep(TICK_S)

    def _connect(self) -> None:
        """A GCS client with the lab's token, without a driver (no core worker, no signal
        handlers of Ray's in this process): the node table and the draining nodes."""
        from workloads.common.ray_private import GcsState

        self.gcs = GcsState(self.head_address)

    def _disconnect(self) -> None:
        if self.gcs is not None:
            self.gcs.disconnect()
            self.gcs = None

    def _start_node(self, spec: NodeSpec, replaces: str | None = None,
                    attempt: int = 1) -> Node:
        ports = node_ports({port for node in self.nodes.values()
                            for port in vars(node.ports).values()}
                           | ports_of_other_labs(self.lab_id))
        endpoint = NoticeEndpoint(instance_id=spec.name)
        record: dict[str, Any] = {"name": spec.name, "pool": spec.pool, "slot": spec.slot,
                                  "num_cpus": spec.num_cpus, "pid": None,
                                  "node_manager_port": ports.node_manager,
                                  "ports": {role: port for role, port in vars(ports).items()
                                            if port},
                                  "notice_endpoint": endpoint.url, "replaces": replaces}
        self.state.setdefault("nodes", []).append(record)
        self._save()  # named before it starts: its marker finds it even if we die now
        env = {
            **lab_env(self.temp_dir),
            MARKER_ENV: node_marker(self.lab_id, spec.name),
            IMDS_ENDPOINT_ENV: endpoint.url,
            DRAIN_TIMEOUT_ENV: f"{self.budget.drain_timeout_s:g}" if spec.pool == POOL_SPOT
            else "0",
            **SLOW_MACHINE_RAY_CONFIG,
            **NO_METRICS_EXPORT,
            **self._shared_env(),
        }
        argv = ray_node_argv(spec, ports, head_address=self.head_address or "",
                             temp_dir=self.temp_dir, object_store_mb=self.config.object_store_mb,
                             dashboard=self.config.dashboard)
        process = procs.spawn(argv, env=env, log_path=self._log(spec.name))
        record["pid"] = process.pid
        self._save()
        node = Node(spec, ports, endpoint, process, started_at=time.time(), replaces=replaces,
                    attempt=attempt)
        if spec.pool == POOL_SPOT:
            node.agent = procs.spawn(self._agent_argv(node), env=env,
                                     log_path=self._log(f"{spec.name}-agent"))
        self.nodes[spec.name] = node
        self._event("start", node, t=node.started_at, attempt=attempt, pid=process.pid,
                    agent_pid=node.agent.pid if node.agent else None)
        return node

    def _shared_env(self) -> dict[str, str]:
        """The lab's shared folder, as every node (replacements too) and driver sees it."""
        shared = self.state.get("shared_dir")
        return {SHARED_ENV: str(shared)} if shared else {}

    def _agent_argv(self, node: Node) -> list[str]:
        """The node's notice agent: the same program a spot pod runs beside Ray, on this
        lab's clock (its warning), finding its node by the raylet's port (every lab node has
        the same IP)."""
        argv = [sys.executable, "-m", NOTICE_AGENT_MODULE, "--gcs-address", self.head_address,
                "--node-manager-port", str(node.ports.node_manager), "--name", node.spec.name,
                "--warning", f"{self.config.warning_s:g}", "--events", str(self.events_path)]
        return argv + (["--drain-on-rebalance"] if self.config.drain_on_rebalance else [])

    # --- the preemption loop ----------------------------------------------------------------

    def run(self) -> None:
        while True:
            with self.lock:
                self.tick()
            time.sleep(TICK_S)

    def tick(self) -> None:
        now = time.time()
        lab_s = now - self.up_at
        # the schedule ahead first: the chains' past steps are forgotten once passed
        if self.config.rebalance_chance > 0:
            self._recommend_rebalances(now, lab_s)
        due = self.capacity.interruptions_between(self.scheduled_to, lab_s)
        self.scheduled_to = lab_s
        available = self.capacity.available(lab_s)
        for node in list(self.nodes.values()):  # before the GCS is asked: it may be gone
            self._watch_exit(node, now)
        infos = self._ray_nodes()
        self._watch_joins(infos, record=True)
        draining = self._draining()
        requested = self._interrupt_requests()
        for slot, up in enumerate(available):
            if up:
                self.outage_since.pop(slot, None)
            else:
                self.outage_since.setdefault(slot, now)
        for interruption in due:
            if interruption.slot is not None:
                self.outage_since[interruption.slot] = self.up_at + interruption.t
            else:
                self._interrupt_one(interruption, now)
        for node in list(self.nodes.values()):
            self._watch_node(node, infos, draining, now)
            home = node.spec.slot
            if home is not None and available[home]:
                node.exempt = False  # capacity is back: the next outage hits it too
            asked = node.spec.name in requested
            # Only a node that has joined is preempted: one still booting gets its notice
            # once it is up, if its capacity is still gone by then.
            if node.preemptible and node.notice_at is None and (
                    asked or (home is not None and not available[home] and not node.exempt)):
                self._preempt(node, now, None if asked or home is None
                              else self.outage_since.get(home))
            elif home is None and asked and node.killed_at is None:
                self._kill(node)  # an on-demand instance that fails gets no notice
        for slot, (since, replaced) in sorted(self.vacant.items()):
            if available[slot] and now >= since + self.config.replace_delay_s:
                del self.vacant[slot]
                self._start_replacement(slot, replaced)
        self._bill(now)
        self._drop_gone(now)
        if now - self.saved_at >= SAVE_EVERY_S:  # the bill so far, for spot-lab-status
            self._save()

    def _start_replacement(self, slot: int, replaces: str, *, exempt: bool = False) -> Node:
        name = f"spot-{self.next_spot}"
        self.next_spot += 1
        node = self._start_node(NodeSpec(name, POOL_SPOT, self.config.cpus_per_node, slot),
                                replaces=replaces)
        node.exempt = exempt
        self._event("replacement-started", node, slot=slot, replaces=replaces,
                    after_rebalance=exempt)
        return node

    def _interrupt_one(self, interruption: Interruption, now: float) -> None:
        """An explicit schedule's point: the node a rebalance recommendation was sent to for
        it, else one of the running spot nodes (drawn with the lab's seed); none running:
        the point is missed, as a FIS experiment finds no target."""
        name = self.reserved.pop(interruption.key, None)
        scheduled = self.up_at + interruption.t
        if name is not None:
            node = self.nodes.get(name)
            if node is None or not node.preemptible:
                return  # it went ahead of its notice (the node group's drain): done
        else:
            node = self._draw_node()
            if node is None:
                self._lab_event("interruption-missed", scheduled_at=scheduled,
                                why="no running spot node")
                return
        self._preempt(node, now, scheduled)

    def _draw_node(self, exclude: set[str] | None = None) -> Node | None:
        candidates = sorted(name for name, node in self.nodes.items() if node.preemptible
                            and node.notice_at is None and name not in (exclude or set()))
        if not candidates:
            return None
        return self.nodes[candidates[int(self.draws.integers(len(candidates)))]]

    def _recommend_rebalances(self, now: float, lab_s: float) -> None:
        """Decide, once per interruption to come within the lead, whether a rebalance
        recommendation announces it; if so, send it to the node it will hit."""
        horizon = lab_s + self.config.rebalance_lead_s
        if horizon <= self.looked_to:
            return
        upcoming = self.capacity.interruptions_between(self.looked_to, horizon)
        self.looked_to = horizon
        for interruption in upcoming:
            if self.draws.random() >= self.config.rebalance_chance:
                continue
            if interruption.slot is None:
                node = self._draw_node(exclude=set(self.reserved.values()))
                if node is not None:
                    self.reserved[interruption.key] = node.spec.name
            else:
                node = next((n for n in self.nodes.values() if n.spec.slot == interruption.slot
                             and n.preemptible and not n.exempt), None)
            if node is not None and node.rebalance_at is None and node.notice_at is None:
                self._recommend_rebalance(node, now, self.up_at + interruption.t)

    def _recommend_rebalance(self, node: Node, now: float, interruption_at: float) -> None:
        """The recommendation on the node's endpoint, and the node group's answer: a
        replacement, started at once into capacity the coming outage does not take."""
        assert node.spec.slot is not None
        node.rebalance_at = now
        node.endpoint.post_rebalance(now)
        self._event("rebalance", node, scheduled_at=interruption_at,
                    lead_s=round(interruption_at - now, 3))
        replacement = self._start_replacement(node.spec.slot, node.spec.name, exempt=True)
        node.rebalance_replacement = replacement.spec.name

    def _rebalance_drain(self, node: Node, now: float) -> None:
        """Its replacement joined: the node group cordons and drains the node (SIGTERM to
        its `ray start`, which drains Ray for the drain timeout and stops), and the instance
        ends once the pod is gone, within its grace period at the latest."""
        node.ending = CAUSE_REBALANCE
        self._event("rebalance-drain", node, grace_s=self.budget.grace_period_s)
        node.process.terminate()
        timer = threading.Timer(self.budget.grace_period_s, self._kill, args=(node,))
        timer.daemon = True
        timer.start()

    def _preempt(self, node: Node, now: float, scheduled_at: float | None = None) -> None:
        """The interruption notice on the node's endpoint; its agent drains the node; at the
        deadline the instance ends."""
        node.notice_at = now
        node.ending = CAUSE_NOTICE
        node.deadline = now + self.config.warning_s
        node.endpoint.post_notice(node.deadline)
        self._event("notice", node, t=now, deadline=node.deadline,
                    warning_s=self.config.warning_s,
                    scheduled_at=scheduled_at, rebalance_at=node.rebalance_at)
        timer = threading.Timer(self.config.warning_s, self._kill, args=(node,))
        timer.daemon = True
        timer.start()

    def _kill(self, node: Node) -> None:
        """At the deadline (or the end of the node group's drain) the instance is
        terminated: whatever is left of it is killed, at once, without waiting for the loop
        (its GCS calls can take a while)."""
        killed_at = time.time()
        with self.kill_guard:  # its deadline's timer and the end of its drain may both come
            if node.killed_at is not None:
                return
            node.killed_at = killed_at
        killed = self._stop_node(node, grace_s=0.0)
        with self.lock:
            if self.stopping:
                return
            node.endpoint.close()
            self._event("kill", node, t=killed_at, pids_left=killed, cause=node.ending)
            if node.spec.slot is not None and not self._replaced(node):
                self._vacate(node, killed_at)
            self._forget(node)

    def _replaced(self, node: Node) -> bool:
        """A replacement the node group started for it is still on its way or running."""
        replacement = self.nodes.get(node.rebalance_replacement or "")
        return replacement is not None and replacement.exited_at is None

    def _watch_node(self, node: Node, infos: RayNodes, draining: dict[str, int],
                    now: float) -> None:
        if node.drain_seen_at is None and node.ray_id is not None and node.ray_id in draining:
            node.drain_seen_at = now
            self._event("draining", node, ray_deadline=draining[node.ray_id] / 1000)
        if (node.agent is not None and not node.agent_exited and node.killed_at is None
                and node.agent.poll() is not None):
            node.agent_exited = True
            self._event("agent-exit", node, returncode=node.agent.returncode)
        self._watch_exit(node, now)
        if node.ray_id and node.dead_at is None and infos.dead(node.ray_id):
            node.dead_at = now
            self._event("dead", node)

    def _watch_exit(self, node: Node, now: float) -> None:
        """A node's `ray start` that ended: what it left is stopped by the node's marker (a
        head killed outright leaves its GCS, dashboard and agents, which nothing else ends);
        a head's end also ends every question to its GCS."""
        if node.exited_at is None and node.process.poll() is not None:
            node.exited_at = now
            self._event("exit", node, returncode=node.process.returncode,
                        expected=node.ending is not None)
            if node.ending == CAUSE_REBALANCE:
                threading.Thread(target=self._kill, args=(node,), daemon=True).start()
            elif node.ending is None and node.killed_at is None:  # it ended by itself
                self._stop_node(node, grace_s=5.0)  # what its `ray start` left
                node.endpoint.close()
                if node.spec.slot is not None and not self._replaced(node):
                    self._vacate(node, now)  # a spot node that died by itself is replaced too
                self._forget(node)
            if node.spec.pool == POOL_HEAD and not self.stopping:
                self.head_lost = True

    def _vacate(self, node: Node, now: float) -> None:
        """The node's slot waits for capacity and a replacement. A replacement that never
        joined passes on the name of the node it was to replace."""
        assert node.spec.slot is not None
        replaced = node.replaces if node.ray_id is None and node.replaces else node.spec.name
        self.vacant.setdefault(node.spec.slot, (now, replaced))

    def _watch_joins(self, infos: RayNodes, *, record: bool) -> None:
        for node in list(self.nodes.values()):
            info = infos.alive_by_port.get(node.ports.node_manager)
            if node.ray_id is None and node.exited_at is None and info is not None:
                node.ray_id = info["NodeID"]
                node.joined_at = time.time()
                if record:
                    self._event("join", node, replaces=node.replaces,
                                start_to_join_s=node.joined_at - node.started_at,
                                attempts=node.attempt, pid=node.process.pid,
                                notice_endpoint=node.endpoint.url)
                    replaced = self.nodes.get(node.replaces or "")
                    if (replaced is not None and replaced.rebalance_replacement
                            == node.spec.name and replaced.ending is None
                            and replaced.exited_at is None):
                        self._rebalance_drain(replaced, node.joined_at)

    def _drop_gone(self, now: float) -> None:
        """Forget, in memory too, nodes that are gone and whose death Ray has listed (or
        long enough ago): the supervisor of a long run holds its live nodes only."""
        for name, node in list(self.nodes.items()):
            gone_at = node.killed_at or (node.exited_at if node.ending is None else None)
            if gone_at is not None and (node.dead_at is not None or node.ray_id is None
                                        or now - gone_at > GONE_FORGOTTEN_S):
                del self.nodes[name]

    def _bill(self, now: float) -> None:
        spot = [n for n in self.nodes.values() if n.spec.slot is not None]
        spot_up = sum(1 for n in spot if n.joined_at is not None and not n.gone)
        self.meter.charge_until(
            now,
            on_demand=sum(1 for n in self.nodes.values()
                          if n.spec.slot is None and n.exited_at is None),
            # a node and its rebalance replacement both bill while they overlap
            spot=max(self.config.spot, spot_up),
            spot_up=spot_up,
            spot_price=self.capacity.price(now - self.up_at),
        )

    # --- Ray's view, interrupt requests, records ---------------------------------------------

    def _ray_nodes(self) -> RayNodes:
        return RayNodes.of(self._from_gcs(self.gcs.node_table, []))

    def _draining(self) -> dict[str, int]:
        draining: dict[str, int] = self._from_gcs(self.gcs.draining_nodes, {})
        return draining

    def _from_gcs(self, read: Any, none: Any) -> Any:
        """A read of the GCS within GCS_READ_S; `none` once the head is gone, or when the
        GCS did not answer in time (Ray's client waits a minute for a GCS that died)."""
        if self.head_lost:
            return none
        try:
            return call_within(read, GCS_READ_S)
        except DeadlineExceeded:
            return none

    def _interrupt_requests(self) -> set[str]:
        """Nodes asked to be interrupted now (spotlab.lab.interrupt: like AWS FIS's
        send-spot-instance-interruptions), each request taken once."""
        names = set()
        for request in self.interrupts_dir.iterdir():
            names.add(request.name)
            request.unlink(missing_ok=True)
        return names

    def _event(self, kind: str, node: Node, **details: Any) -> None:
        self._write({"t": details.pop("t", time.time()), "event": kind, "node": node.spec.name,
                     "pool": node.spec.pool, "slot": node.spec.slot, "ray_node_id": node.ray_id,
                     **details})

    def _lab_event(self, kind: str, **details: Any) -> None:
        """An event of no node (a scheduled interruption that found none)."""
        self._write({"t": details.pop("t", time.time()), "event": kind, "node": None,
                     **details})

    def _write(self, row: dict[str, Any]) -> None:
        """One line, one write: the nodes' agents append to the same file."""
        with self.events_path.open("a") as out:
            out.write(json.dumps(row) + "\n")

    def _save(self) -> None:
        if self.up_at:
            self.state["billing"] = {"cost": self.meter.cost, "on_demand_node_s":
                                     self.meter.on_demand_s, "spot_up_node_s":
                                     self.meter.spot_up_s,
                                     "observed_alpha": self.meter.observed_alpha}
        save_state(self.state)
        self.saved_at = time.time()

    def _log(self, name: str) -> Path:
        return self.temp_dir / "logs" / f"{name}.log"

    def _stop_node(self, node: Node, grace_s: float) -> int:
        """Stop what is left of a node: its `ray start` (our child) and every process that
        carries its marker (its Ray daemons and workers); returns how many were running."""
        marker = node_marker(self.lab_id, node.spec.name)
        own = {node.process.pid} | ({node.agent.pid} if node.agent else set())
        stopped = procs.stop_all_marked(marker, own, grace_s=grace_s)
        node.process.poll()
        if node.agent is not None:
            node.agent.poll()
        return len(stopped.stopped | stopped.left)

    def _forget(self, node: Node) -> None:
        """The state file keeps live nodes only (the history is in events.jsonl)."""
        self.state["nodes"] = [record for record in self.state.get("nodes", [])
                               if not (record["name"] == node.spec.name
                                       and record["pid"] == node.process.pid)]
        self._save()

    # --- teardown ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop every node this supervisor started: workers first (each drains and stops its
        own Ray processes), then the head, then whatever is left of any of them."""
        with self.lock:  # a kill timer that fires from here on records nothing
            self.stopping = True
        if self.up_at:
            self._bill(time.time())
            self._save()
        self._disconnect()
        say(f"stopping {len(self.nodes)} nodes")
        workers = [n for n in self.nodes.values() if n.spec.pool != POOL_HEAD]
        heads = [n for n in self.nodes.values() if n.spec.pool == POOL_HEAD]
        for group in (workers, heads):
            procs.stop_children([n.process for n in group], grace_s=self.config.warning_s + 10.0)
        for node in self.nodes.values():
            left = self._stop_node(node, grace_s=5.0)
            if left:
                say(f"node {node.spec.name}: stopped {left} processes it left")
            node.endpoint.close()
        left_anywhere = procs.stop_all_marked(self.lab_id, grace_s=5.0)  # never itself
        if left_anywhere.stopped or left_anywhere.left:
            say(f"stopped {len(left_anywhere.stopped)} more processes of the lab")
        say("all nodes stopped")


class StartFailed(RunFailed):
    """A node did not come up in its attempts; the message names it and its log's gist."""


def say(message: str) -> None:
    print(f"spotlab supervisor {time.strftime('%H:%M:%S')}: {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spotlab",
                                     description="Run one spot lab until SIGTERM (internal).")
    parser.add_argument("lab_id")
    args = parser.parse_args(argv)
    supervisor = Supervisor(args.lab_id)
    with procs.sigterm_raises_interrupt():
        try:
            try:
                supervisor.start()
            except StartFailed as error:
                print(f"{FAILED_LINE} {one_line(error)}", flush=True)
                return 1
            except Exception as error:  # its traceback stays in this log; the line says why
                traceback.print_exc()
                print(f"{FAILED_LINE} {type(error).__name__}: {one_line(error)}", flush=True)
                return 1
            supervisor.run()
        except KeyboardInterrupt:  # SIGTERM
            pass
        finally:
            with procs.interrupts_ignored():
                supervisor.stop()
    return 0
