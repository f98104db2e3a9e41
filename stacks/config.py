"""The one place that reads stack config: frozen, validated dataclasses for every experiment.

Nothing is declared before `load_config` returns, so a bad value never leaves a half-built
stack behind. Every key a user may set is listed in README.md ("Config reference").
"""

from __future__ import annotations

import ipaddress
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from stacks.fields import ConfigError, Fields, min_desired_max, parse_cidr

PROJECT = "spotburst"
KNOWN_EXPERIMENTS = ("doll", "burst")
# What every burst node installs next to Ray, at the versions installed here.
BURST_NODE_PACKAGES = ("numpy", "pillow", "boto3")
_INSTANCE_TYPE = r"[a-z][a-z0-9-]*\.[a-z0-9]+"
_REGION = r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d"


@dataclass(frozen=True)
class NodeGroupConfig:
    instance_types: tuple[str, ...]
    min_size: int
    desired_size: int
    max_size: int


@dataclass(frozen=True)
class PodResources:
    cpu: str
    memory: str


@dataclass(frozen=True)
class RayWorkersConfig:
    resources: PodResources
    min_replicas: int
    replicas: int
    max_replicas: int


@dataclass(frozen=True)
class DollConfig:
    vpc_cidr: str
    az_count: int
    eks_version: str
    head_nodes: NodeGroupConfig
    worker_nodes: NodeGroupConfig
    kuberay_version: str
    namespace: str
    ray_head: PodResources
    ray_workers: RayWorkersConfig


@dataclass(frozen=True)
class BurstConfig:
    onprem_cidr: str
    cloud_cidr: str
    instance_type: str
    login_nodes: int
    hpc_workers: int
    cloud_nodes: int
    login_disk_gb: int
    worker_disk_gb: int


@dataclass(frozen=True)
class BucketConfig:
    force_destroy: bool
    versioning: bool
    expire_results_after_days: int


@dataclass(frozen=True)
class SpotburstConfig:
    stack: str
    region: str
    experiments: tuple[str, ...]
    admin_cidrs: tuple[str, ...]
    bucket: BucketConfig
    doll: DollConfig
    burst: BurstConfig
    ray_version: str
    ray_image: str
    node_packages: tuple[str, ...]

    @property
    def name_prefix(self) -> str:
        return f"{PROJECT}-{self.stack}"


def installed_ray_image() -> tuple[str, str]:
    """The Ray version installed here and the matching image (Ray and Python must match)."""
    ray_version = version("ray")
    python_tag = f"py{sys.version_info.major}{sys.version_info.minor}"
    return ray_version, f"rayproject/ray:{ray_version}-{python_tag}"


def pinned_node_packages() -> tuple[str, ...]:
    """pip requirements for burst nodes: the same Ray and workload libraries as here."""
    ray = f"ray[default]=={version('ray')}"
    return (ray, *(f"{name}=={version(name)}" for name in BURST_NODE_PACKAGES))


def parse_config(raw: Mapping[str, str], stack: str) -> SpotburstConfig:
    """Validate raw stack config (`namespace:key` -> string or JSON string)."""
    values = {key: _decode(value) for key, value in raw.items()}
    region = values.get("aws:region")
    if not isinstance(region, str) or re.fullmatch(_REGION, region) is None:
        raise ConfigError(f"aws:region: {region!r} is not an AWS region such as us-east-1")
    ours = {
        key.split(":", 1)[1]: value
        for key, value in values.items()
        if key.startswith(f"{PROJECT}:")
    }
    top = Fields(PROJECT, ours, separator=":")
    top.reject_unknown({"experiments", "adminCidrs", "bucket", "doll", "burst"})
    experiments = _experiments(top)
    admin_cidrs = _admin_cidrs(top)
    ray_version, ray_image = installed_ray_image()
    config = SpotburstConfig(
        stack=stack,
        region=region,
        experiments=experiments,
        admin_cidrs=admin_cidrs,
        bucket=_bucket(top.object("bucket")),
        doll=_doll(top.object("doll")),
        burst=_burst(top.object("burst")),
        ray_version=ray_version,
        ray_image=ray_image,
        node_packages=pinned_node_packages(),
    )
    _reject_overlapping_networks(config)
    return config


def _decode(value: str) -> Any:
    try:
        return json.loads(value)
    except (TypeError, json.JSONDecodeError):
        return value


def _experiments(top: Fields) -> tuple[str, ...]:
    names = top.string_list("experiments", r"[a-z-]+", "experiment names", min_items=1)
    unknown = [name for name in names if name not in KNOWN_EXPERIMENTS]
    if unknown:
        raise ConfigError(
            f"{top.key('experiments')}: unknown experiment {unknown[0]!r}; "
            f"known experiments are {', '.join(KNOWN_EXPERIMENTS)}"
        )
    return names


def _admin_cidrs(top: Fields) -> tuple[str, ...]:
    cidrs = top.raw("adminCidrs") if "adminCidrs" in top.values else []
    if not isinstance(cidrs, list):
        raise ConfigError(f"{top.key('adminCidrs')}: {cidrs!r} is not a list of CIDR blocks")
    return tuple(parse_cidr(top.key("adminCidrs"), cidr, private=False) for cidr in cidrs)


def _bucket(fields: Fields) -> BucketConfig:
    fields.reject_unknown({"forceDestroy", "versioning", "expireResultsAfterDays"})
    return BucketConfig(
        force_destroy=fields.boolean("forceDestroy"),
        versioning=fields.boolean("versioning"),
        expire_results_after_days=fields.integer("expireResultsAfterDays", 1),
    )


def _doll(fields: Fields) -> DollConfig:
    fields.reject_unknown(
        {
            "vpcCidr",
            "azCount",
            "eksVersion",
            "headNodes",
            "workerNodes",
            "kuberayVersion",
            "namespace",
            "rayHead",
            "rayWorkers",
        }
    )
    return DollConfig(
        vpc_cidr=fields.cidr("vpcCidr", private=True),
        az_count=fields.integer("azCount", 2, 6),
        eks_version=fields.string("eksVersion", r"1\.\d{2}", 'an EKS version such as "1.34"'),
        head_nodes=_head_nodes(fields.object("headNodes")),
        worker_nodes=_worker_nodes(fields.object("workerNodes")),
        kuberay_version=fields.string(
            "kuberayVersion", r"1\.\d+\.\d+", "a KubeRay chart version 1.x.y such as 1.7.0"
        ),
        namespace=fields.string(
            "namespace", r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "a Kubernetes namespace name"
        ),
        ray_head=_pod_resources(fields.object("rayHead"), set()),
        ray_workers=_ray_workers(fields.object("rayWorkers")),
    )


def _burst(fields: Fields) -> BurstConfig:
    fields.reject_unknown(
        {
            "onpremCidr",
            "cloudCidr",
            "instanceType",
            "loginNodes",
            "hpcWorkers",
            "cloudNodes",
            "loginDiskGb",
            "workerDiskGb",
        }
    )
    if fields.raw("loginNodes") != 1:
        raise ConfigError(
            f"{fields.key('loginNodes')}: {fields.raw('loginNodes')!r} is not allowed; the login "
            "node runs the Ray head, so exactly 1"
        )
    return BurstConfig(
        onprem_cidr=fields.cidr("onpremCidr", private=True),
        cloud_cidr=fields.cidr("cloudCidr", private=True),
        instance_type=fields.string(
            "instanceType", _INSTANCE_TYPE, "an EC2 instance type such as r5.4xlarge"
        ),
        login_nodes=1,
        hpc_workers=fields.integer("hpcWorkers", 0),
        cloud_nodes=fields.integer("cloudNodes", 1),
        login_disk_gb=fields.integer("loginDiskGb", 8, 16384),
        worker_disk_gb=fields.integer("workerDiskGb", 8, 16384),
    )


def _head_nodes(fields: Fields) -> NodeGroupConfig:
    fields.reject_unknown({"instanceType", "count"})
    instance_type = fields.string(
        "instanceType", _INSTANCE_TYPE, "an EC2 instance type such as m5.xlarge"
    )
    count = fields.integer("count", 1)
    return NodeGroupConfig((instance_type,), count, count, count)


def _worker_nodes(fields: Fields) -> NodeGroupConfig:
    fields.reject_unknown({"instanceTypes", "minSize", "desiredSize", "maxSize"})
    instance_types = fields.string_list(
        "instanceTypes", _INSTANCE_TYPE, "EC2 instance types (spot capacity is diversified)", 2
    )
    low, desired, high = min_desired_max(fields, "node group", "minSize", "desiredSize", "maxSize")
    return NodeGroupConfig(instance_types, low, desired, high)


def _pod_resources(fields: Fields, extra_keys: set[str]) -> PodResources:
    fields.reject_unknown({"cpu", "memory"} | extra_keys)
    return PodResources(cpu=fields.quantity("cpu"), memory=fields.quantity("memory"))


def _ray_workers(fields: Fields) -> RayWorkersConfig:
    resources = _pod_resources(fields, {"minReplicas", "replicas", "maxReplicas"})
    low, replicas, high = min_desired_max(
        fields, "worker group", "minReplicas", "replicas", "maxReplicas"
    )
    return RayWorkersConfig(resources, low, replicas, high)


def _reject_overlapping_networks(config: SpotburstConfig) -> None:
    networks: dict[str, str] = {}
    if "doll" in config.experiments:
        networks[f"{PROJECT}:doll.vpcCidr"] = config.doll.vpc_cidr
    if "burst" in config.experiments:
        networks[f"{PROJECT}:burst.onpremCidr"] = config.burst.onprem_cidr
        networks[f"{PROJECT}:burst.cloudCidr"] = config.burst.cloud_cidr
    seen: list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]] = []
    for key, cidr in networks.items():
        network = ipaddress.ip_network(cidr)
        for other_key, other in seen:
            if network.overlaps(other):
                raise ConfigError(
                    f"{key}: {cidr} overlaps {other_key} ({other}); use disjoint blocks"
                )
        seen.append((key, network))


def load_config() -> SpotburstConfig:
    """The validated config of the stack being deployed (or run offline by `invoke plan`)."""
    import pulumi
    from pulumi.runtime.config import CONFIG

    return parse_config(dict(CONFIG.get()), pulumi.get_stack())
