"""The notice agent against a real Ray cluster (a spot lab): Ray's private DrainNode API as
the agent uses it, pinned, and the agent's drain at a notice seen in Ray's draining table
within a second."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import procs
from spotlab import SpotLab, SpotLabConfig, spot_lab
from spotlab.state import STATE_DIR_ENV
from tests.helpers.waiting import wait_until
from workloads.common.notice_agent import RayNodeDrainer

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


def _alive(drainer: RayNodeDrainer, node_id: str) -> bool:
    infos = drainer.client.get_all_node_info(timeout=5)
    return any(nid.hex() == node_id and info.state == 0 for nid, info in infos.items())


def test_the_agent_finds_its_node_by_its_raylet_port(lab: SpotLab,
                                                     busy_node: dict[str, Any]) -> None:
    drainer = RayNodeDrainer(lab.ray_address)
    port = next(n["node_manager_port"] for n in lab.nodes() if n["name"] == "spot-0")
    assert drainer.find_node(None, port) == busy_node["ray_node_id"]
    assert drainer.find_node("198.51.100.99", port) is None
    assert drainer.find_node(None, 1) is None


def test_drain_node_takes_the_hex_id_a_binary_one_is_accepted_and_drains_nothing(
        lab: SpotLab, busy_node: dict[str, Any]) -> None:
    """Pinned: `GcsClient.drain_node` decodes the id as hex (what `ray start`'s SIGTERM
    handler passes) although its docstring asks for binary; a binary id is ACCEPTED and
    drains nothing. An upgrade of Ray that changes either fails here."""
    from ray.core.generated import autoscaler_pb2

    drainer = RayNodeDrainer(lab.ray_address)
    node = busy_node["ray_node_id"]
    deadline = time.time() + 300
    accepted, _ = drainer.client.drain_node(
        bytes.fromhex(node),
        autoscaler_pb2.DrainNodeReason.Value(  # type: ignore[attr-defined]
            "DRAIN_NODE_REASON_PREEMPTION"),
        "binary id", int(deadline * 1000), timeout=5)
    assert accepted is True
    assert node not in drainer.client.get_draining_nodes(timeout=5)
    assert drainer.drain(node, deadline, "hex id") == (True, "")
    assert drainer.client.get_draining_nodes(timeout=5)[node] == int(deadline * 1000)


def test_at_the_notice_the_agent_drains_within_a_second_with_the_notices_deadline(
        lab: SpotLab, busy_node: dict[str, Any]) -> None:
    """A later drain with an earlier deadline replaces the one Ray holds (the agent's,
    after the test's own above); Ray's draining table shows it within a second of the
    notice, and the node dies at the notice's time, not at the drain."""
    drainer = RayNodeDrainer(lab.ray_address)
    node = busy_node["ray_node_id"]
    earlier_deadline = drainer.client.get_draining_nodes(timeout=5).get(node)
    lab.interrupt("spot-0")

    def drained_by_the_agent() -> float | None:
        deadline = drainer.client.get_draining_nodes(timeout=5).get(node)
        return time.time() if deadline not in (None, earlier_deadline) else None

    # Ray's own draining table, polled from here: when it first holds the agent's deadline
    seen_at = wait_until(drained_by_the_agent, 30, "spot-0 draining with the notice's deadline",
                         poll_s=0.02)
    drain = wait_until(lambda: next((e for e in lab.events() if e["event"] == "agent-drain"
                                     and e["node"] == "spot-0"), None), 30, "the agent's drain")
    notice = next(e for e in lab.events() if e["event"] == "notice" and e["node"] == "spot-0")
    assert drain["accepted"] is True and drain["ray_node_id"] == node
    print(f"notice -> agent's drain {drain['t'] - notice['t']:.3f} s, notice -> Ray's "
          f"draining table {seen_at - notice['t']:.3f} s")
    assert 0 <= drain["t"] - notice["t"] < 1.0
    assert 0 <= seen_at - notice["t"] < 1.0
    assert drain["deadline"] == pytest.approx(
        notice["deadline"] - CONFIG.budget().deadline_margin_s, abs=0.01)
    assert drainer.client.get_draining_nodes(timeout=5)[node] == int(drain["deadline"] * 1000)
    # the node stays up (busy) past the drain deadline, until the lab ends the instance at
    # the notice's time; its raylet gets SIGTERM then SIGKILL, so Ray records
    # EXPECTED_TERMINATION, not a death inferred from the drain
    wait_until(lambda: not _alive(drainer, node), 60, "spot-0's death in Ray")
    gone = time.time()
    assert gone - notice["deadline"] > -0.5
