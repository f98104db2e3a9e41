"""Bad config fails before any resource is declared, naming the key and what is allowed."""

from __future__ import annotations

import json
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest
from pulumi.runtime import mocks

from launch.stack_config import PROJECT_DIR
from stacks.config import ConfigError, parse_config


def _edit(raw: dict[str, str], key: str, change: Callable[[Any], Any]) -> dict[str, str]:
    value = json.loads(raw[key])
    changed = change(value)
    return {**raw, key: json.dumps(value if changed is None else changed)}


def _set(path: str, new_value: Any) -> Callable[[Any], None]:
    def change(value: Any) -> None:
        *parents, leaf = path.split(".")
        for parent in parents:
            value = value[int(parent)] if isinstance(value, list) else value[parent]
        if isinstance(value, list):
            value[int(leaf)] = new_value
        else:
            value[leaf] = new_value

    return change


BAD_CONFIG = [
    # (key, change, words the message must contain)
    (
        "spotburst:spotCluster",
        _set("vpcCidr", "11.0.0.0/16"),
        ["spotburst:spotCluster.vpcCidr", "not private"],
    ),
    ("spotburst:spotCluster", _set("vpcCidr", "10.0.0.0/33"), ["spotCluster.vpcCidr", "CIDR"]),
    ("spotburst:spotCluster", _set("vpcCidr", "10.0.0.0/12"), ["vpcCidr", "/16 and /24"]),
    ("spotburst:spotCluster", _set("azCount", 1), ["spotCluster.azCount", "between 2 and 6"]),
    ("spotburst:spotCluster", _set("eksVersion", "latest"), ["spotCluster.eksVersion", "1.34"]),
    (
        "spotburst:spotCluster",
        _set("kuberayVersion", "0.6.0"),
        ["spotburst:spotCluster.kuberayVersion", "1.x.y"],
    ),
    (
        "spotburst:spotCluster",
        _set("kuberayVersion", "1.0.0"),
        ["spotburst:spotCluster.kuberayVersion", "too old", ">= 1.6.0"],
    ),
    (
        "spotburst:spotCluster",
        _set("clusterAutoscalerVersion", "1.31.2"),
        ["spotCluster.clusterAutoscalerVersion", "does not match eksVersion 1.34"],
    ),
    (
        "spotburst:spotCluster",
        _set("nodePools.spotCpu.minSize", 30),
        ["spotburst:spotCluster.nodePools.spotCpu.maxSize", "between 30 and 200"],
    ),
    (
        "spotburst:spotCluster",
        _set("nodePools.spotCpu.minSize", -1),
        ["spotCluster.nodePools.spotCpu.minSize", "between 0 and 200"],
    ),
    (
        "spotburst:spotCluster",
        _set("nodePools.head.minSize", 0),
        ["spotCluster.nodePools.head.minSize", "between 1 and 200"],
    ),
    (
        "spotburst:spotCluster",
        _set("nodePools.spotCpu.instanceTypes", ["c5.xlarge"]),
        ["spotCluster.nodePools.spotCpu.instanceTypes", "at least 2"],
    ),
    (
        "spotburst:spotCluster",
        _set("nodePools.spotGpu.instanceTypes", ["g4dn 2xlarge"]),
        ["spotCluster.nodePools.spotGpu.instanceTypes", "'g4dn 2xlarge'"],
    ),
    (
        "spotburst:spotCluster",
        _set("nodePools.cheapGpu", {}),
        ["spotburst:spotCluster.nodePools.cheapGpu", "unknown key"],
    ),
    ("spotburst:spotCluster", _set("vpcCdir", "10.0.0.0/16"), ["spotCluster.vpcCdir", "unknown"]),
    ("spotburst:doll", _set("head.cpu", "0"), ["spotburst:doll.head.cpu", "positive"]),
    (
        "spotburst:doll",
        _set("workerGroups", []),
        ["spotburst:doll.workerGroups", "at least 1 worker group"],
    ),
    (
        "spotburst:elastic",
        _set("workerGroups.0.memory", "-5Gi"),
        ["spotburst:elastic.workerGroups[0].memory", "positive"],
    ),
    (
        "spotburst:doll",
        _set("workerGroups.0.replicas", 40),
        ["spotburst:doll.workerGroups[0]", "minReplicas <= replicas <= maxReplicas"],
    ),
    (
        "spotburst:rl",
        _set("workerGroups.1.nodePool", "spot"),
        ["spotburst:rl.workerGroups[1].nodePool", "'spot'", "spotCpu"],
    ),
    (
        "spotburst:rl",
        _set("workerGroups.0.gpu", 0),
        ["spotburst:rl.workerGroups[0].gpu", "GPU pool learnerGpu"],
    ),
    (
        "spotburst:inference",
        _set("workerGroups.0.gpu", 1),
        ["spotburst:inference.workerGroups[0].gpu", "no GPUs"],
    ),
    (
        "spotburst:rl",
        _set("workerGroups.0.resources", {"spot": 3}),
        ["spotburst:rl.workerGroups[0].resources.spot", "spot nodes", "on-demand"],
    ),
    (
        "spotburst:doll",
        _set("workerGroups.0.resources", {"on_demand": 3}),
        ["spotburst:doll.workerGroups[0].resources.on_demand", "on-demand nodes"],
    ),
    (
        "spotburst:doll",
        _set("workerGroups.0.resources", {"spot": -1}),
        ["spotburst:doll.workerGroups[0].resources.spot", "between 0 and 1000"],
    ),
    (
        "spotburst:doll",
        _set("workerGroups.0.resources", {"my resource": 1}),
        ["spotburst:doll.workerGroups[0].resources.my resource", "Ray resource name"],
    ),
    (
        "spotburst:elastic",
        _set("workerGroups.1.name", "spot-workers"),
        ["spotburst:elastic.workerGroups", "repeat"],
    ),
    ("spotburst:doll", _set("namespace", "kube-system"), ["spotburst:doll.namespace", "own"]),
    ("spotburst:rl", _set("namespace", "doll"), ["spotburst:rl.namespace", "already", "doll"]),
    ("spotburst:rl", _set("rayAutoscaler", "yes"), ["spotburst:rl.rayAutoscaler", "true or false"]),
    ("spotburst:doll", _set("rayWorkers", {}), ["spotburst:doll.rayWorkers", "unknown key"]),
    (
        "spotburst:bucket",
        _set("expireResultsAfterDays", 0),
        ["spotburst:bucket.expireResultsAfterDays", "between 1 and 3650"],
    ),
    (
        "spotburst:bucket",
        _set("forceDestroy", "yes"),
        ["spotburst:bucket.forceDestroy", "true or false"],
    ),
    (
        "spotburst:experiments",
        lambda _: ["doll", "dolly"],
        ["spotburst:experiments", "'dolly'", "doll"],
    ),
    ("spotburst:experiments", lambda _: [], ["spotburst:experiments", "at least 1"]),
    ("spotburst:adminCidrs", lambda _: ["my laptop"], ["spotburst:adminCidrs", "'my laptop'"]),
]


@pytest.mark.parametrize(("key", "change", "words"), BAD_CONFIG)
def test_bad_value_names_the_key_and_what_is_allowed(
    dev_config: dict[str, str], key: str, change: Callable[[Any], Any], words: list[str]
) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(_edit(dev_config, key, change), "dev")
    for word in words:
        assert word in str(error.value)


def test_unknown_top_level_key_is_rejected(dev_config: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="spotburst:adminCidr: unknown key"):
        parse_config({**dev_config, "spotburst:adminCidr": "[]"}, "dev")


def test_bad_region_is_rejected(dev_config: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="aws:region"):
        parse_config({**dev_config, "aws:region": "mars-1"}, "dev")


def test_an_enabled_experiment_needs_its_section(dev_config: dict[str, str]) -> None:
    without_rl = {key: value for key, value in dev_config.items() if key != "spotburst:rl"}
    with pytest.raises(ConfigError, match="spotburst:rl: missing"):
        parse_config(without_rl, "dev")
    only_burst = {
        **{key: value for key, value in without_rl.items() if key != "spotburst:spotCluster"},
        "spotburst:experiments": '["burst"]',
    }
    config = parse_config(only_burst, "dev")
    assert config.spot_cluster is None and config.ray_clusters == {}


def test_a_disabled_experiments_section_is_still_checked(dev_config: dict[str, str]) -> None:
    config = {**dev_config, "spotburst:experiments": '["doll"]'}
    assert list(parse_config(config, "dev").ray_clusters) == ["doll"]
    with pytest.raises(ConfigError, match="spotburst:rl.namespace"):
        parse_config(_edit(config, "spotburst:rl", _set("namespace", "Bad_Name")), "dev")


def test_the_real_entry_point_declares_nothing_on_bad_config(dev_config: dict[str, str]) -> None:
    """`__main__.py`, as `pulumi up` runs it, stops at the config before any resource."""
    monitor = mocks.MockMonitor(_NoCloud())
    mocks.set_mocks(monitor.mocks, project="spotburst", stack="dev", preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(
        _edit(dev_config, "spotburst:spotCluster", _set("nodePools.spotCpu.minSize", 99))
    )
    with pytest.raises(ConfigError, match="maxSize"):
        runpy.run_path(str(Path(PROJECT_DIR) / "__main__.py"))
    assert monitor.get_registered_resources() == {}


class _NoCloud(pulumi.runtime.Mocks):
    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        raise AssertionError(f"declared {args.typ} despite bad config")

    def call(self, args: mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        raise AssertionError(f"invoked {args.token} despite bad config")


def test_the_real_entry_point_exports_the_outputs(dev_config: dict[str, str]) -> None:
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    from launch.offline import _CloudMocks

    monitor = mocks.MockMonitor(_CloudMocks("us-east-1"))
    mocks.set_mocks(monitor.mocks, project="spotburst", stack="dev", preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(dev_config)
    def program() -> None:
        runpy.run_path(str(Path(PROJECT_DIR) / "__main__.py"))

    _sync_await(run_pulumi_func(program))
    types = {
        registration.urn.split("::")[2].split("$")[-1]
        for registration in monitor.resources.values()
    }
    assert {"spotburst:kuberay:KubeRayOperator", "kubernetes:ray.io/v1:RayCluster"} <= types


BAD_BURST_CONFIG = [
    ({"cloudCidr": "10.0.128.0/17"}, ["spotburst:burst.cloudCidr", "overlaps", "onpremCidr"]),
    (
        {"onpremCidr": "10.42.0.0/16"},
        ["spotburst:burst.onpremCidr", "overlaps", "spotCluster.vpcCidr"],
    ),
    ({"cloudCidr": "11.0.0.0/16"}, ["spotburst:burst.cloudCidr", "not private"]),
    ({"loginNodes": 0}, ["spotburst:burst.loginNodes", "exactly 1"]),
    ({"hpcWorkers": -1}, ["spotburst:burst.hpcWorkers", "between 0 and 64"]),
    ({"cloudNodes": 0}, ["spotburst:burst.cloudNodes", "between 1 and 64"]),
    ({"workerDiskGb": 2}, ["spotburst:burst.workerDiskGb", "between 8 and 16384"]),
    ({"instanceType": ""}, ["spotburst:burst.instanceType", "r5.4xlarge"]),
]


@pytest.mark.parametrize(("change", "words"), BAD_BURST_CONFIG)
def test_bad_burst_value_names_the_key(
    dev_config: dict[str, str], change: dict[str, Any], words: list[str]
) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(_edit(dev_config, "spotburst:burst", lambda value: {**value, **change}), "dev")
    for word in words:
        assert word in str(error.value)


# --- numbers that would switch a check off, sizes nobody needs, pods that fit no node --------

NAN, INF = float("nan"), float("inf")
NOT_FINITE = [
    # as a raw Pulumi config value (JSON), and inside a section's JSON
    ({"spotburst:maxHourlyUsd": "NaN"}, "spotburst:maxHourlyUsd: nan is not allowed"),
    ({"spotburst:maxHourlyUsd": "Infinity"}, "spotburst:maxHourlyUsd: inf is not allowed"),
    ({"spotburst:maxHourlyUsd": "-Infinity"}, "spotburst:maxHourlyUsd: -inf is not allowed"),
]


@pytest.mark.parametrize(("changed", "start"), NOT_FINITE)
def test_a_budget_that_is_not_a_finite_number_is_refused(
    dev_config: dict[str, str], changed: dict[str, str], start: str
) -> None:
    """A nan compares False with every limit: `maxHourlyUsd: .nan` passed any stack."""
    with pytest.raises(ConfigError) as error:
        parse_config({**dev_config, **changed}, "dev")
    assert str(error.value) == f"{start}; expected a finite number >= 0"


@pytest.mark.parametrize("amount", [NAN, INF, -INF, 1001])
def test_a_placement_resource_must_be_a_finite_number_up_to_1000(
    dev_config: dict[str, str], amount: float
) -> None:
    resources = _set("workerGroups.0.resources", {"spot": amount})
    changed = _edit(dev_config, "spotburst:doll", resources)
    with pytest.raises(ConfigError) as error:
        parse_config(changed, "dev")
    assert str(error.value) == (
        f"spotburst:doll.workerGroups[0].resources.spot: {amount!r} is not allowed; expected a "
        "finite number between 0 and 1000")


SIZES = [
    # (key, path, largest allowed)
    ("spotburst:spotCluster", "nodePools.spotCpu.maxSize", 200),
    ("spotburst:spotCluster", "nodePools.head.maxSize", 200),
    ("spotburst:doll", "workerGroups.0.maxReplicas", 1000),
    ("spotburst:burst", "hpcWorkers", 64),
    ("spotburst:burst", "cloudNodes", 64),
    ("spotburst:bucket", "expireResultsAfterDays", 3650),
]


@pytest.mark.parametrize(("key", "path", "largest"), SIZES)
def test_sizes_have_an_upper_bound(
    dev_config: dict[str, str], key: str, path: str, largest: int
) -> None:
    parse_config(_edit(dev_config, key, _set(path, largest)), "dev")
    for too_big in (largest + 1, 10**9):
        with pytest.raises(ConfigError) as error:
            parse_config(_edit(dev_config, key, _set(path, too_big)), "dev")
        dotted = path.replace(".0.", "[0].")
        assert str(error.value).startswith(f"{key}.{dotted}: {too_big} is not allowed; expected "
                                           "an integer between ")
        assert str(error.value).endswith(f" and {largest}")


def _fits(dev_config: dict[str, str], key: str, path: str, value: Any) -> str:
    with pytest.raises(ConfigError) as error:
        parse_config(_edit(dev_config, key, _set(path, value)), "dev")
    return str(error.value)


def test_a_worker_cpu_request_must_fit_the_smallest_type_of_its_pool(
    dev_config: dict[str, str],
) -> None:
    assert _fits(dev_config, "spotburst:doll", "workerGroups.0.cpu", "9999") == (
        "spotburst:doll.workerGroups[0].cpu: the pod asks 9999 CPUs; a spotCpu node of type "
        "c5.xlarge leaves 3.5 to pods (4 vCPUs less 0.5 for the kubelet and daemon sets); ask "
        "for less or give the pool larger instance types")
    # 3.5 fits a 4-vCPU node, 3501m does not
    parse_config(_edit(dev_config, "spotburst:doll", _set("workerGroups.0.cpu", "3500m")), "dev")
    assert "asks 3.501 CPUs" in _fits(dev_config, "spotburst:doll", "workerGroups.0.cpu", "3501m")


def test_memory_and_gpus_must_fit_too_and_the_smallest_type_is_named(
    dev_config: dict[str, str],
) -> None:
    # c5.xlarge has 8 GiB: pods get 85 % of it, 6.8 GiB
    assert _fits(dev_config, "spotburst:doll", "workerGroups.0.memory", "7Gi") == (
        "spotburst:doll.workerGroups[0].memory: the pod asks 7 GiB; a spotCpu node of type "
        "c5.xlarge leaves 6.8 to pods (85% of its 8 GiB); ask for less or give the pool larger "
        "instance types")
    assert "asks 2 GPUs" in _fits(dev_config, "spotburst:rl", "workerGroups.2.gpu", 2)
    # a GPU pool whose only type has no GPU takes no GPU pod
    no_gpu = _fits(dev_config, "spotburst:spotCluster", "nodePools.spotGpu.instanceTypes",
                   ["c5.4xlarge"])
    assert no_gpu == (
        "spotburst:elastic.workerGroups[1].gpu: the pod asks 1 GPUs; a spotGpu node of type "
        "c5.4xlarge leaves 0 to pods (it has 0); ask for less or give the pool larger instance "
        "types")
    # the smallest of the pool's types decides: m5.xlarge (4 vCPUs) beside m5.2xlarge (8)
    head = _edit(dev_config, "spotburst:spotCluster",
                 _set("nodePools.head.instanceTypes", ["m5.2xlarge", "m5.xlarge"]))
    with pytest.raises(ConfigError) as error:
        parse_config(_edit(head, "spotburst:doll", _set("head.cpu", "4")), "dev")
    assert str(error.value).startswith(
        "spotburst:doll.head.cpu: the pod asks 4 CPUs; a head node of type m5.xlarge leaves "
        "3.5 to pods")


def test_a_head_with_the_ray_autoscaler_counts_its_container(dev_config: dict[str, str]) -> None:
    # elastic's head: 7 CPUs + the autoscaler's 0.5 = 7.5, what an m5.2xlarge leaves: fits
    parse_config(_edit(dev_config, "spotburst:elastic", _set("head.cpu", "7")), "dev")
    assert _fits(dev_config, "spotburst:elastic", "head.cpu", "7100m").startswith(
        "spotburst:elastic.head.cpu: the pod asks 7.6 CPUs (with the Ray autoscaler's "
        "container); a head node of type m5.2xlarge leaves 7.5 to pods")


def test_a_disabled_experiments_pods_must_fit_too(dev_config: dict[str, str]) -> None:
    only_doll = {**dev_config, "spotburst:experiments": '["doll"]'}
    with pytest.raises(ConfigError, match=r"^spotburst:rl\.workerGroups\[1\]\.cpu: the pod asks"):
        parse_config(_edit(only_doll, "spotburst:rl", _set("workerGroups.1.cpu", "64")), "dev")


def test_a_pool_type_missing_from_the_instance_table_is_refused(
    dev_config: dict[str, str],
) -> None:
    assert _fits(dev_config, "spotburst:spotCluster", "nodePools.spotCpu.instanceTypes",
                 ["c5.xlarge", "x9z.mega"]) == (
        "spotburst:spotCluster.nodePools.spotCpu.instanceTypes: x9z.mega is not in "
        "vocab/instances.json; add its vCPUs, memory and GPUs there (they decide which pods "
        "fit its nodes) or use a type listed there")


def test_every_shipped_pod_fits_and_every_priced_type_has_a_shape() -> None:
    from launch.stack_config import read_stack_config
    from vocab.instances import load_instance_shapes
    from vocab.prices import load_price_table

    assert set(load_price_table()["instances"]) <= set(load_instance_shapes())
    shipped = {**read_stack_config("dev"), "spotburst:adminCidrs": '["198.51.100.7/32"]'}
    assert parse_config(shipped, "dev").spot_cluster is not None
