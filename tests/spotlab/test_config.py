"""The lab's settings, its preemption schedules and the shared vocabulary (no Ray)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotlab.capacity import SpotCapacity
from spotlab.config import SpotLabConfig, SpotLabConfigError
from spotlab.supervisor import node_ports, ray_node_argv
from vocab.spot import (
    CAPACITY_ON_DEMAND,
    CAPACITY_SPOT,
    POOL_HEAD,
    POOL_LEARNER,
    POOL_SPOT,
    SPOT_RESOURCE,
    node_labels,
    placement_resources,
)
from workloads.common.spot_market.billing import Meter


@pytest.mark.parametrize("changes, flag", [
    ({"spot": -1}, "--spot"),
    ({"on_demand": 17}, "--on-demand"),
    ({"cpus_per_node": 0}, "--cpus-per-node"),
    ({"alpha": 0.0}, "--alpha"),
    ({"alpha": 1.5}, "--alpha"),
    ({"warning_s": 0}, "--warning"),
    ({"replace_delay_s": -1}, "--replace-delay"),
    ({"bid": 0.1}, "--trace is required with --bid"),
    ({"trace": "x.json"}, "--bid is required with --trace"),
    ({"trace": "/nonexistent.json", "bid": 0.1}, "--trace: /nonexistent.json: no such file"),
    ({"object_store_mb": 10}, "--object-store-mb"),
])
def test_a_bad_setting_names_its_flag(changes: dict[str, object], flag: str) -> None:
    with pytest.raises(SpotLabConfigError) as raised:
        SpotLabConfig(**changes)  # type: ignore[arg-type]
    assert str(raised.value).startswith(flag)


def test_nodes_and_round_trip() -> None:
    config = SpotLabConfig(spot=2, on_demand=1, learner=1, cpus_per_node=2)
    assert [(n.name, n.pool, n.slot) for n in config.nodes()] == [
        ("head", POOL_HEAD, None), ("od-0", "on-demand", None), ("learner-0", POOL_LEARNER, None),
        ("spot-0", POOL_SPOT, 0), ("spot-1", POOL_SPOT, 1)]
    assert SpotLabConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    with pytest.raises(SpotLabConfigError, match="--colour: unknown"):
        SpotLabConfig.from_dict({"colour": 1})


def test_a_spot_node_carries_the_spot_clusters_labels_and_resources() -> None:
    spec = SpotLabConfig(cpus_per_node=2).nodes()[-1]
    argv = ray_node_argv(spec, node_ports(set()), head_address="127.0.0.1:1",
                         temp_dir=Path("/t"), object_store_mb=100)
    assert "--labels=capacity=spot,pool=spot" in argv
    assert f"--resources={json.dumps({SPOT_RESOURCE: 2.0})}" in argv
    assert "--block" in argv and "--address=127.0.0.1:1" in argv
    assert node_labels(POOL_HEAD) == {"capacity": CAPACITY_ON_DEMAND, "pool": POOL_HEAD}
    assert node_labels(POOL_SPOT)["capacity"] == CAPACITY_SPOT
    assert placement_resources(POOL_HEAD, 4) == {}
    assert placement_resources(POOL_LEARNER, 1) == {"learner": 1.0}
    with pytest.raises(ValueError, match="pool 'gpu'"):
        node_labels("gpu")


def test_nodes_started_together_never_share_a_port() -> None:
    """Ports are chosen before any node binds them: each node's differ from the others'."""
    taken: set[int] = set()
    for _ in range(20):
        ports = {port for port in vars(node_ports(taken)).values() if port}
        assert len(ports) == 9 and not ports & taken
        taken |= ports


def test_the_markov_schedule_is_the_seeds_and_has_availability_alpha() -> None:
    config = SpotLabConfig(spot=8, alpha=0.9, refresh_s=0.5, seed=3)
    first, second = SpotCapacity(config), SpotCapacity(config)
    samples = [first.available(t * 5.0) for t in range(1, 4001)]  # every 10th refresh
    assert samples[-1] == second.available(20000.0)  # missed refreshes are stepped through
    up = sum(sum(row) for row in samples) / (8 * len(samples))
    assert up == pytest.approx(0.9, abs=0.05)
    assert any(not all(row) for row in samples)
    assert SpotCapacity(SpotLabConfig(alpha=1.0)).available(1e5) == [True] * 3


def test_the_trace_preempts_while_the_price_is_above_the_bid() -> None:
    config = SpotLabConfig(spot=2, trace=str(SpotLabConfig().price_trace().file), bid=0.0001,
                           trace_compression=2000.0)
    assert SpotCapacity(config).available(0.0) == [False, False]
    generous = SpotLabConfig(spot=2, trace=config.trace, bid=100.0)
    assert SpotCapacity(generous).available(5.0) == [True, True]


def test_the_meter_bills_on_demand_always_and_spot_while_up() -> None:
    meter = Meter(on_demand_price=0.36)
    meter.charge_until(3600.0, on_demand=1, spot=2, spot_up=1, spot_price=0.1)
    assert meter.cost == pytest.approx(0.36 + 0.1)
    assert (meter.on_demand_s, meter.spot_s, meter.spot_up_s) == (3600.0, 7200.0, 3600.0)
    assert meter.observed_alpha == 0.5
    with pytest.raises(ValueError, match="spot_up <= spot"):
        meter.charge_until(7200.0, on_demand=1, spot=1, spot_up=2, spot_price=0.1)


@pytest.mark.subprocess
@pytest.mark.parametrize("argv, message", [
    (["spot-lab-up", "--spot", "many"],
     "error: --spot: expected an integer in [0, 16], got 'many'"),
    (["spot-lab-up", "--alpha", "0"], "error: --alpha: expected a number in (0, 1], got '0'"),
    (["spot-lab-up", "--warning", "-1"],
     "error: --warning: expected a number in [0.01, 86400], got '-1'"),
    (["spot-lab-up", "--bid", "0.1"], "error: --trace: is required with --bid"),
    (["spot-lab-down", "--lab", "nope"], "error: --lab: no spot lab 'nope'"),
])
def test_a_task_given_bad_input_says_which_flag_in_one_line(
    argv: list[str], message: str, tmp_path: Path
) -> None:
    import os
    import subprocess
    import sys

    invoke = Path(sys.executable).with_name("invoke")
    done = subprocess.run([str(invoke), *argv], cwd=Path(__file__).resolve().parents[2],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SPOTBURST_SPOTLAB_STATE_DIR": str(tmp_path)})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith(message)
    assert not list(tmp_path.iterdir())  # nothing half-done


def test_lab_options_describe_the_lab_they_start() -> None:
    from spotlab.options import LAB_SPEC

    options = LAB_SPEC.from_text({"spot": "2", "learner": "1", "warning": "3",
                                  "lab_seed": "7", "alpha": "0.5"})
    config = options.config()
    assert (config.spot, config.on_demand, config.learner) == (2, 1, 1)
    assert (config.warning_s, config.seed, config.alpha) == (3.0, 7, 0.5)
    assert config.dashboard  # runs are submitted through the lab's Jobs API
    assert LAB_SPEC.default().config() == SpotLabConfig()  # one set of defaults


def test_a_workload_may_change_a_lab_default_and_keeps_the_flags_and_rules() -> None:
    from launch.options import ELASTIC_LAB_SPEC
    from spotlab.options import LAB_SPEC

    slower = ELASTIC_LAB_SPEC
    assert slower.default().config().refresh_s == 0.5
    assert slower.default().config().spot == SpotLabConfig().spot  # the rest unchanged
    assert [o.flag for o in slower.options] == [o.flag for o in LAB_SPEC.options]
    assert slower.from_text({"refresh": "0.2"}).config().refresh_s == 0.2
    with pytest.raises(ValueError, match="--refresh"):
        slower.from_text({"refresh": "0"})


def test_a_replacement_on_a_dead_nodes_port_neither_hides_the_death_nor_joins_as_it() -> None:
    from spotlab.supervisor import RayNodes

    table = [
        {"NodeID": "old", "NodeManagerPort": 5100, "Alive": False},
        {"NodeID": "new", "NodeManagerPort": 5100, "Alive": True},
        {"NodeID": "od", "NodeManagerPort": 5200, "Alive": True},
    ]
    for order in (table, table[::-1]):
        nodes = RayNodes.of(order)
        assert nodes.dead("old") and not nodes.dead("new") and not nodes.dead("od")
        assert nodes.alive_by_port[5100]["NodeID"] == "new"
        assert not nodes.dead("never-listed")  # one incomplete read kills nobody
