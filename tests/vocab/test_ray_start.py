"""The shared topology: one `ray start` line per role."""

from __future__ import annotations

import json

import pytest

from vocab.burst import TRANSFER_RESOURCE
from vocab.ports import RayPorts
from vocab.ray_start import ray_start_args


def test_the_head_binds_the_dashboard_where_told_and_has_no_transfer_slot() -> None:
    args = ray_start_args("login", node_ip="10.0.1.5", num_cpus=2)
    assert args[:3] == ["ray", "start", "--head"]
    assert "--port=6379" in args and "--dashboard-port=8265" in args
    assert "--dashboard-host=127.0.0.1" in args
    assert "--labels=site=onprem,role=login" in args
    assert not any(arg.startswith("--resources") for arg in args)
    assert "--dashboard-host=0.0.0.0" in ray_start_args(
        "login", node_ip="10.0.1.5", num_cpus=2, dashboard_host="0.0.0.0")


@pytest.mark.parametrize("role, site", [("hpc", "onprem"), ("cloud", "cloud")])
def test_other_roles_join_the_head_with_labels_and_one_transfer_slot(role: str,
                                                                     site: str) -> None:
    args = ray_start_args(role, node_ip="10.1.0.7", num_cpus=16, head_address="10.0.1.5:6379")
    assert "--address=10.0.1.5:6379" in args
    assert f"--labels=site={site},role={role}" in args
    assert "--num-cpus=16" in args
    resources = next(a for a in args if a.startswith("--resources="))
    assert json.loads(resources.split("=", 1)[1]) == {TRANSFER_RESOURCE: 1}
    assert "--head" not in args


def test_ports_are_fixed_and_overridable() -> None:
    args = ray_start_args("cloud", node_ip="1.2.3.4", num_cpus=1, head_address="1.2.3.5:6379",
                          ports=RayPorts(object_manager=9000, min_worker=20000,
                                         max_worker=20100))
    assert "--object-manager-port=9000" in args
    assert "--node-manager-port=8077" in args
    assert "--min-worker-port=20000" in args and "--max-worker-port=20100" in args


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"role": "gpu", "head_address": "1.1.1.1:6379"}, "role 'gpu'"),
        ({"role": "hpc"}, "head_address is required"),
        ({"role": "hpc", "head_address": "1.1.1.1:6379", "num_cpus": -1}, "num_cpus"),
    ],
)
def test_bad_roles_and_missing_head_are_errors(kwargs: dict, message: str) -> None:
    kwargs = {"node_ip": "1.2.3.4", "num_cpus": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        ray_start_args(**kwargs)


def test_the_ports_between_nodes_cover_every_fixed_port_and_the_worker_range() -> None:
    ranges = RayPorts().between_nodes()
    assert (6379, 6379) in ranges and (8076, 8076) in ranges and (10002, 10999) in ranges
    assert len(ranges) == 9
