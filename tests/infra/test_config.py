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

from launch.offline import PROJECT_DIR
from stacks.config import ConfigError, parse_config
from stacks.program import EXPERIMENTS


def _edit(raw: dict[str, str], key: str, change: Callable[[Any], Any]) -> dict[str, str]:
    value = json.loads(raw[key])
    changed = change(value)
    return {**raw, key: json.dumps(value if changed is None else changed)}


def _set(path: str, new_value: Any) -> Callable[[Any], None]:
    def change(value: Any) -> None:
        *parents, leaf = path.split(".")
        for parent in parents:
            value = value[parent]
        value[leaf] = new_value

    return change


BAD_CONFIG = [
    # (key, change, words the message must contain)
    ("spotburst:doll", _set("vpcCidr", "11.0.0.0/16"), ["spotburst:doll.vpcCidr", "not private"]),
    ("spotburst:doll", _set("vpcCidr", "10.0.0.0/33"), ["spotburst:doll.vpcCidr", "CIDR"]),
    ("spotburst:doll", _set("vpcCidr", "10.0.0.0/12"), ["spotburst:doll.vpcCidr", "/16 and /24"]),
    ("spotburst:doll", _set("azCount", 1), ["spotburst:doll.azCount", "between 2 and 6"]),
    (
        "spotburst:doll",
        _set("workerNodes.minSize", 9),
        ["spotburst:doll.workerNodes", "minSize <= desiredSize <= maxSize"],
    ),
    (
        "spotburst:doll",
        _set("workerNodes.desiredSize", 20),
        ["spotburst:doll.workerNodes", "maxSize"],
    ),
    (
        "spotburst:doll",
        _set("workerNodes.maxSize", 0),
        ["spotburst:doll.workerNodes.maxSize", ">= 1"],
    ),
    (
        "spotburst:doll",
        _set("workerNodes.minSize", -1),
        ["spotburst:doll.workerNodes.minSize", ">= 0"],
    ),
    (
        "spotburst:doll",
        _set("workerNodes.instanceTypes", []),
        ["spotburst:doll.workerNodes.instanceTypes", "at least 2"],
    ),
    (
        "spotburst:doll",
        _set("workerNodes.instanceTypes", ["c5.xlarge"]),
        ["spotburst:doll.workerNodes.instanceTypes", "at least 2"],
    ),
    (
        "spotburst:doll",
        _set("workerNodes.instanceTypes", ["c5.xlarge", "big box"]),
        ["spotburst:doll.workerNodes.instanceTypes", "'big box'"],
    ),
    ("spotburst:doll", _set("headNodes.count", 0), ["spotburst:doll.headNodes.count", ">= 1"]),
    ("spotburst:doll", _set("rayHead.cpu", "0"), ["spotburst:doll.rayHead.cpu", "positive"]),
    (
        "spotburst:doll",
        _set("rayWorkers.memory", "-5Gi"),
        ["spotburst:doll.rayWorkers.memory", "positive"],
    ),
    (
        "spotburst:doll",
        _set("rayWorkers.replicas", 40),
        ["spotburst:doll.rayWorkers", "minReplicas <= replicas <= maxReplicas"],
    ),
    ("spotburst:doll", _set("eksVersion", "latest"), ["spotburst:doll.eksVersion", "1.34"]),
    ("spotburst:doll", _set("kuberayVersion", "0.6.0"), ["spotburst:doll.kuberayVersion", "1.x.y"]),
    ("spotburst:doll", _set("vpcCdir", "10.0.0.0/16"), ["spotburst:doll.vpcCdir", "unknown key"]),
    (
        "spotburst:bucket",
        _set("expireResultsAfterDays", 0),
        ["spotburst:bucket.expireResultsAfterDays", ">= 1"],
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


def test_every_known_experiment_has_a_builder() -> None:
    from stacks.config import KNOWN_EXPERIMENTS

    assert set(EXPERIMENTS) == set(KNOWN_EXPERIMENTS)


def test_the_real_entry_point_declares_nothing_on_bad_config(dev_config: dict[str, str]) -> None:
    """`__main__.py`, as `pulumi up` runs it, stops at the config before any resource."""
    monitor = mocks.MockMonitor(_NoCloud())
    mocks.set_mocks(monitor.mocks, project="spotburst", stack="dev", preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(
        _edit(dev_config, "spotburst:doll", _set("workerNodes.minSize", 99))
    )
    with pytest.raises(ConfigError, match="minSize"):
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
    _sync_await(run_pulumi_func(lambda: runpy.run_path(str(Path(PROJECT_DIR) / "__main__.py"))))
    types = {
        registration.urn.split("::")[2].split("$")[-1]
        for registration in monitor.resources.values()
    }
    assert {"spotburst:kuberay:KubeRay", "kubernetes:ray.io/v1:RayCluster"} <= types


BAD_BURST_CONFIG = [
    ({"cloudCidr": "10.0.128.0/17"}, ["spotburst:burst.cloudCidr", "overlaps", "onpremCidr"]),
    ({"onpremCidr": "10.42.0.0/16"}, ["spotburst:burst.onpremCidr", "overlaps", "doll.vpcCidr"]),
    ({"cloudCidr": "11.0.0.0/16"}, ["spotburst:burst.cloudCidr", "not private"]),
    ({"loginNodes": 0}, ["spotburst:burst.loginNodes", "exactly 1"]),
    ({"hpcWorkers": -1}, ["spotburst:burst.hpcWorkers", ">= 0"]),
    ({"cloudNodes": 0}, ["spotburst:burst.cloudNodes", ">= 1"]),
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
