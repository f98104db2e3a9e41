"""The notice agent against a real Ray cluster (a spot lab): Ray's private DrainNode API as
the agent uses it, pinned, and the agent's drain at a notice seen in Ray's draining table
within a second."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import procs
from spotlab import SpotLab, SpotLabConfig, spot_lab
from spotlab.state import STATE_DIR_ENV
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]
CONFIG = SpotLabConfig(spot=1, on_demand=0, cpus_per_node=1, alpha=1.0, warning_s=4.0,
                       replace_delay_s=1.0, object_store_mb=80, dashboard=False)
BUSY = """
import ray, time
ray.init()

@ray.remote(num_cpus=1, resources={"spot": 1}, max_retries=0)
def busy():
    print("busy on the spot node", flush=True)
    time.sleep(600)

ref = busy.remote()
print("submitted", flush=True)
try:
    ray.get(ref)
except Exception as error:
    print("ended", type(error).__name__, flush=True)
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpotLab]:
    directory = tmp_path_factory.mktemp("spotlab-state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_DIR_ENV, str(directory))
        with spot_lab(CONFIG) as running:
            for key, value in running.driver_env.items():
                patch.setenv(key, value)  # the token, for this process's GCS client
            yield running


@pytest.fixture(scope="module")
def busy_node(lab: SpotLab) -> Iterator[dict[str, Any]]:
    """spot-0 running a long task (a drained idle node would end at once)."""
    driver = subprocess.Popen([sys.executable, "-c", BUSY], cwd=REPO,
                              env={**os.environ, **lab.driver_env}, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        procs.wait_for_line(driver, "busy on the spot node", timeout_s=120,
                            name="the task on spot-0")
        yield next(e for e in lab.events() if e["event"] == "join" and e["node"] == "spot-0")
    finally:
        procs.stop(driver)


GCS_PROBE = """
import json, sys, time
from ray.core.generated import autoscaler_pb2
from workloads.common.notice_agent import RayNodeDrainer

address, action, node, *rest = sys.argv[1:]
drainer = RayNodeDrainer(address)
client = drainer.client

def alive():
    infos = client.get_all_node_info(timeout=5)
    return any(nid.hex() == node and info.state == 0 for nid, info in infos.items())

if action == "find":
    port = int(rest[0])
    print(json.dumps([drainer.find_node(None, port), drainer.find_node("198.51.100.99", port),
                      drainer.find_node(None, 1)]))
elif action == "drain-ids":
    deadline = time.time() + 300
    accepted, _ = client.drain_node(
        bytes.fromhex(node),
        autoscaler_pb2.DrainNodeReason.Value("DRAIN_NODE_REASON_PREEMPTION"),
        "binary id", int(deadline * 1000), timeout=5)
    after_binary = node in client.get_draining_nodes(timeout=5)
    by_hex = drainer.drain(node, deadline, "hex id")
    print(json.dumps({"binary_accepted": accepted, "draining_after_binary": after_binary,
                      "hex": list(by_hex), "deadline_ms": int(deadline * 1000),
                      "held_ms": client.get_draining_nodes(timeout=5).get(node)}))
elif action == "watch":
    earlier = client.get_draining_nodes(timeout=5).get(node)
    print("watching", flush=True)
    seen_at = held = None
    stop = time.time() + 60
    while time.time() < stop:
        held = client.get_draining_nodes(timeout=5).get(node)
        if held not in (None, earlier):
            seen_at = time.time()
            break
        time.sleep(0.02)
    while time.time() < stop + 60 and alive():
        time.sleep(0.1)
    print(json.dumps({"seen_at": seen_at, "held_ms": held, "gone_at": time.time(),
                      "alive": alive()}), flush=True)
"""
"""Ray's GCS client, from a process of its own with the lab's token (as the agent runs): Ray
fixes a process's auth mode the first time it loads its config, so a test process that
used Ray before without a token could not talk to the lab."""


def gcs_probe(lab: SpotLab, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", GCS_PROBE, lab.ray_address, *args],
                            cwd=REPO, env={**os.environ, **lab.driver_env},
                            stdout=subprocess.PIPE, text=True)


def probe_answer(probe: subprocess.Popen[str], timeout_s: float = 180) -> Any:
    out, _ = probe.communicate(timeout=timeout_s)
    assert probe.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1])


def test_the_agent_finds_its_node_by_its_raylet_port(lab: SpotLab,
                                                     busy_node: dict[str, Any]) -> None:
    port = next(n["node_manager_port"] for n in lab.nodes() if n["name"] == "spot-0")
    found = probe_answer(gcs_probe(lab, "find", busy_node["ray_node_id"], str(port)))
    assert found == [busy_node["ray_node_id"], None, None]


def test_drain_node_takes_the_hex_id_a_binary_one_is_accepted_and_drains_nothing(
        lab: SpotLab, busy_node: dict[str, Any]) -> None:
    """Pinned: `GcsClient.drain_node` decodes the id as hex (what `ray start`'s SIGTERM
    handler passes) although its docstring asks for binary; a binary id is ACCEPTED and
    drains nothing. An upgrade of Ray that changes either fails here."""
    answer = probe_answer(gcs_probe(lab, "drain-ids", busy_node["ray_node_id"]))
    assert answer["binary_accepted"] is True
    assert answer["draining_after_binary"] is False
    assert answer["hex"] == [True, ""]
    assert answer["held_ms"] == answer["deadline_ms"]


def test_at_the_notice_the_agent_drains_within_a_second_with_the_notices_deadline(
        lab: SpotLab, busy_node: dict[str, Any]) -> None:
    """A later drain with an earlier deadline replaces the one Ray holds (the agent's,
    after the test's own above); Ray's draining table shows it within a second of the
    notice, and the node dies at the notice's time, not at the drain."""
    node = busy_node["ray_node_id"]
    watcher = gcs_probe(lab, "watch", node)
    assert watcher.stdout is not None
    assert watcher.stdout.readline().strip() == "watching"
    lab.interrupt("spot-0")
    # Ray's own draining table, polled from the watcher: when it first holds the agent's
    # deadline, and when Ray's node table has the node dead
    watched = probe_answer(watcher)
    drain = wait_until(lambda: next((e for e in lab.events() if e["event"] == "agent-drain"
                                     and e["node"] == "spot-0"), None), 30, "the agent's drain")
    notice = next(e for e in lab.events() if e["event"] == "notice" and e["node"] == "spot-0")
    assert drain["accepted"] is True and drain["ray_node_id"] == node
    assert watched["seen_at"] is not None, watched
    print(f"notice -> agent's drain {drain['t'] - notice['t']:.3f} s, notice -> Ray's "
          f"draining table {watched['seen_at'] - notice['t']:.3f} s")
    assert 0 <= drain["t"] - notice["t"] < 1.0
    assert 0 <= watched["seen_at"] - notice["t"] < 1.0
    assert drain["deadline"] == pytest.approx(
        notice["deadline"] - CONFIG.budget().deadline_margin_s, abs=0.01)
    assert watched["held_ms"] == int(drain["deadline"] * 1000)
    # the node stays up (busy) past the drain deadline, until the lab ends the instance at
    # the notice's time; its raylet gets SIGTERM then SIGKILL, so Ray records
    # EXPECTED_TERMINATION, not a death inferred from the drain
    assert watched["alive"] is False
    assert watched["gone_at"] - notice["deadline"] > -0.5
