"""The spot lab's supervisor: `python -m spotlab LAB_ID`, one process per lab.

It starts the lab's Ray nodes (one `ray start --block` each, a notice endpoint each): the
head, then every other node at once; a node whose `ray start` gives up is started again
(START_ATTEMPTS), and a lab that cannot come up ends with FAILED_LINE and why. Then it
drives the preemptions until SIGTERM, then removes every node. On a preemption of a spot
node: its endpoint shows the notice, its `ray start` gets SIGTERM (Ray drains the node with
reason PREEMPTION for RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S = the warning), at the deadline
whatever is left of it is killed, and once capacity is back and the replacement delay has
passed a new node joins in its slot. Every step is an event in `events.jsonl` in the lab's
temp dir, with its wall time `t` (epoch seconds).

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

import procs
from netem.ports import free_local_ports
from procs import MARKER_ENV
from spotlab.capacity import SpotCapacity
from spotlab.config import NodeSpec, SpotLabConfig
from spotlab.endpoint import NoticeEndpoint
from spotlab.state import load_state, node_marker, save_state
from vocab.errors import RunFailed, one_line
from vocab.ports import RayPorts
from vocab.spot import IMDS_ENDPOINT_ENV, POOL_HEAD, POOL_SPOT, node_labels, placement_resources
from workloads.common.billing import Meter

READY_LINE = "spotlab supervisor: lab is up"
FAILED_LINE = "spotlab supervisor: lab failed:"
"""The supervisor's last line when the lab did not come up, then why in a few words."""
TICK_S = 0.1
SAVE_EVERY_S = 2.0
NODE_START_TIMEOUT_S = 120.0
"""From a node's start to its join, per attempt."""
START_ATTEMPTS = 3
GONE_FORGOTTEN_S = 30.0
"""A gone node is dropped from memory once Ray lists it dead, or this long after it went."""
DRAIN_TIMEOUT_ENV = "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"

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
    ray_id: str | None = None
    joined_at: float | None = None
    notice_at: float | None = None
    deadline: float | None = None
    drain_seen_at: float | None = None
    exited_at: float | None = None
    dead_at: float | None = None
    killed_at: float | None = None

    @property
    def gone(self) -> bool:
        """The instance is gone: killed at its deadline, or ended by itself."""
        return self.killed_at is not None or (self.exited_at is not None
                                              and self.notice_at is None)


class Supervisor:
    def __init__(self, lab_id: str) -> None:
        self.state = load_state(lab_id)
        self.lab_id = lab_id
        self.config = SpotLabConfig.from_dict(self.state["config"])
        self.temp_dir = Path(self.state["temp_dir"])
        self.events_path = self.temp_dir / "events.jsonl"
        self.interrupts_dir = self.temp_dir / "interrupts"
        self.capacity = SpotCapacity(self.config)
        self.meter = Meter(self.config.on_demand_price)
        self.nodes: dict[str, Node] = {}
        self.vacant: dict[int, tuple[float, str]] = {}  # slot -> (since, node it replaces)
        self.next_spot = self.config.spot
        self.head_address = ""
        self.up_at = 0.0
        self.gcs: Any = None
        self.lock = threading.RLock()  # the loop's tick vs a node's kill at its deadline
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
            "driver_env": {**lab_env(self.temp_dir), "RAY_ADDRESS": self.head_address},
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
        from ray._private.state import GlobalState
        from ray._raylet import GcsClientOptions  # type: ignore[attr-defined]

        self.gcs = GlobalState()
        self.gcs._initialize_global_state(GcsClientOptions.create(
            self.head_address, None, allow_cluster_id_nil=True, fetch_cluster_id_if_nil=False))

    def _disconnect(self) -> None:
        if self.gcs is not None:
            self.gcs.disconnect()
            self.gcs = None

    def _start_node(self, spec: NodeSpec, replaces: str | None = None,
                    attempt: int = 1) -> Node:
        ports = node_ports({port for node in self.nodes.values()
                            for port in vars(node.ports).values()})
        endpoint = NoticeEndpoint()
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
            DRAIN_TIMEOUT_ENV: str(self.config.warning_s) if spec.pool == POOL_SPOT else "0",
            **SLOW_MACHINE_RAY_CONFIG,
            **NO_METRICS_EXPORT,
        }
        argv = ray_node_argv(spec, ports, head_address=self.head_address or "",
                             temp_dir=self.temp_dir, object_store_mb=self.config.object_store_mb,
                             dashboard=self.config.dashboard)
        process = procs.spawn(argv, env=env, log_path=self._log(spec.name))
        record["pid"] = process.pid
        self._save()
        node = Node(spec, ports, endpoint, process, started_at=time.time(), replaces=replaces,
                    attempt=attempt)
        self.nodes[spec.name] = node
        self._event("start", node, t=node.started_at, attempt=attempt, pid=process.pid)
        return node

    # --- the preemption loop ----------------------------------------------------------------

    def run(self) -> None:
        while True:
            with self.lock:
                self.tick()
            time.sleep(TICK_S)

    def tick(self) -> None:
        now = time.time()
        available = self.capacity.available(now - self.up_at)
        infos = self._ray_nodes()
        self._watch_joins(infos, record=True)
        draining = self._draining()
        requested = self._interrupt_requests()
        for node in list(self.nodes.values()):
            self._watch_node(node, infos, draining, now)
            slot = node.spec.slot
            # Only a node that has joined is preempted: one still booting gets its notice
            # once it is up, if its capacity is still gone by then.
            if (slot is not None and node.ray_id is not None and node.notice_at is None
                    and node.exited_at is None
                    and (not available[slot] or node.spec.name in requested)):
                self._preempt(node, now)
            elif slot is None and node.spec.name in requested and node.killed_at is None:
                self._kill(node)  # an on-demand instance that fails gets no notice
        for slot, (since, replaced) in sorted(self.vacant.items()):
            if available[slot] and now >= since + self.config.replace_delay_s:
                del self.vacant[slot]
                name = f"spot-{self.next_spot}"
                self.next_spot += 1
                node = self._start_node(NodeSpec(name, POOL_SPOT, self.config.cpus_per_node,
                                                 slot), replaces=replaced)
                self._event("replacement-started", node, slot=slot, replaces=replaced)
        self._bill(now)
        self._drop_gone(now)
        if now - self.saved_at >= SAVE_EVERY_S:  # the bill so far, for spot-lab-status
            self._save()

    def _preempt(self, node: Node, now: float) -> None:
        node.notice_at = now
        node.deadline = now + self.config.warning_s
        node.endpoint.post_notice(node.deadline)
        self._event("notice", node, deadline=node.deadline, warning_s=self.config.warning_s)
        node.process.terminate()  # ray start drains its node (PREEMPTION) until the deadline
        timer = threading.Timer(self.config.warning_s, self._kill, args=(node,))
        timer.daemon = True
        timer.start()

    def _kill(self, node: Node) -> None:
        """At the deadline the instance is terminated: whatever is left of it is killed, at
        once, without waiting for the loop (its GCS calls can take a while)."""
        killed_at = time.time()
        killed = self._stop_node(node, grace_s=0.0)
        with self.lock:
            if self.stopping:
                return
            node.killed_at = killed_at
            node.endpoint.close()
            self._event("kill", node, t=killed_at, pids_left=killed)
            if node.spec.slot is not None:
                self._vacate(node, killed_at)
            self._forget(node)

    def _watch_node(self, node: Node, infos: RayNodes, draining: dict[str, int],
                    now: float) -> None:
        if node.notice_at is not None and node.drain_seen_at is None and node.ray_id in draining:
            node.drain_seen_at = now
            self._event("draining", node, ray_deadline=draining[node.ray_id or ""] / 1000)
        if node.exited_at is None and node.process.poll() is not None:
            node.exited_at = now
            self._event("exit", node, returncode=node.process.returncode,
                        expected=node.notice_at is not None)
            if node.notice_at is None and node.killed_at is None:  # it ended by itself
                self._stop_node(node, grace_s=5.0)  # what its `ray start` left
                node.endpoint.close()
                if node.spec.slot is not None:
                    self._vacate(node, now)  # a spot node that died by itself is replaced too
                self._forget(node)
        if node.ray_id and node.dead_at is None and infos.dead(node.ray_id):
            node.dead_at = now
            self._event("dead", node)

    def _vacate(self, node: Node, now: float) -> None:
        """The node's slot waits for capacity and a replacement. A replacement that never
        joined passes on the name of the node it was to replace."""
        assert node.spec.slot is not None
        replaced = node.replaces if node.ray_id is None and node.replaces else node.spec.name
        self.vacant.setdefault(node.spec.slot, (now, replaced))

    def _watch_joins(self, infos: RayNodes, *, record: bool) -> None:
        for node in self.nodes.values():
            info = infos.alive_by_port.get(node.ports.node_manager)
            if node.ray_id is None and node.exited_at is None and info is not None:
                node.ray_id = info["NodeID"]
                node.joined_at = time.time()
                if record:
                    self._event("join", node, replaces=node.replaces,
                                start_to_join_s=node.joined_at - node.started_at,
                                attempts=node.attempt, pid=node.process.pid,
                                notice_endpoint=node.endpoint.url)

    def _drop_gone(self, now: float) -> None:
        """Forget, in memory too, nodes that are gone and whose death Ray has listed (or
        long enough ago): the supervisor of a long run holds its live nodes only."""
        for name, node in list(self.nodes.items()):
            gone_at = node.killed_at or (node.exited_at if node.notice_at is None else None)
            if gone_at is not None and (node.dead_at is not None or node.ray_id is None
                                        or now - gone_at > GONE_FORGOTTEN_S):
                del self.nodes[name]

    def _bill(self, now: float) -> None:
        spot = [n for n in self.nodes.values() if n.spec.slot is not None]
        self.meter.charge_until(
            now,
            on_demand=sum(1 for n in self.nodes.values()
                          if n.spec.slot is None and n.exited_at is None),
            spot=self.config.spot,
            spot_up=sum(1 for n in spot if n.joined_at is not None and not n.gone),
            spot_price=self.capacity.price(now - self.up_at),
        )

    # --- Ray's view, interrupt requests, records ---------------------------------------------

    def _ray_nodes(self) -> RayNodes:
        return RayNodes.of(self.gcs.node_table())

    def _draining(self) -> dict[str, int]:
        draining: dict[str, int] = self.gcs.get_draining_nodes()
        return draining

    def _interrupt_requests(self) -> set[str]:
        """Nodes asked to be interrupted now (spotlab.lab.interrupt: like AWS FIS's
        send-spot-instance-interruptions), each request taken once."""
        names = set()
        for request in self.interrupts_dir.iterdir():
            names.add(request.name)
            request.unlink(missing_ok=True)
        return names

    def _event(self, kind: str, node: Node, **details: Any) -> None:
        row = {"t": details.pop("t", time.time()), "event": kind, "node": node.spec.name,
               "pool": node.spec.pool, "slot": node.spec.slot, "ray_node_id": node.ray_id,
               **details}
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
        stopped = procs.stop_marked(procs.marked_pids(marker) | {node.process.pid}, marker,
                                    grace_s=grace_s)
        node.process.poll()
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
        left_anywhere = procs.stop_marked(procs.marked_pids(self.lab_id) - {os.getpid()},
                                          self.lab_id, grace_s=5.0)
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
