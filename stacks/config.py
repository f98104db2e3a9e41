"""The one place that reads stack config: raw values in, the validated `SpotburstConfig`
(`stacks/config_types.py`) out, or one ConfigError naming the key.

Nothing is declared before `load_config` returns, so a bad value never leaves a half-built
stack behind. Every key a user may set is listed in docs/aws.md ("Config reference").
"""

from __future__ import annotations

import functools
import ipaddress
import json
import re
import sys
from collections.abc import Callable, Mapping
from importlib.metadata import version
from typing import Any, TypeVar

from stacks.config_types import (
    API_ENDPOINT_PRIVATE,
    API_ENDPOINT_PUBLIC,
    HEAD_POOL,
    KNOWN_EXPERIMENTS,
    NODE_POOLS,
    PROJECT,
    RAY_ON_EKS,
    BucketConfig,
    BurstConfig,
    NodePoolConfig,
    NodePoolKind,
    PodResources,
    RayClusterConfig,
    SharedStorageConfig,
    SpotburstConfig,
    SpotClusterConfig,
    WorkerGroupConfig,
)
from stacks.costs import refuse_over_budget
from stacks.fields import (
    WORLD_WIDE_PREFIX,
    ConfigError,
    Fields,
    min_desired_max,
    parse_cidr,
    world_wide,
)
from vocab.instances import (
    INSTANCE_TABLE,
    NODE_RESERVED_CPU,
    POD_MEMORY_SHARE,
    InstanceShape,
    load_instance_shapes,
)
from vocab.shared_data import (
    INFREQUENT_ACCESS_DAYS,
    SHARED_STORAGE_KINDS,
    STORAGE_NONE,
    THROUGHPUT_MODES,
)
from vocab.spot import (
    CAPACITY_ON_DEMAND,
    CAPACITY_SPOT,
    LEARNER_RESOURCE,
    ON_DEMAND_RESOURCE,
    SPOT_RESOURCE,
)

# The one way to let adminCidrs hold a block wider than a /8 of public addresses (0.0.0.0/0,
# ::/0, 0.0.0.0/1, ...): loud on purpose.
WORLD_ADMIN_OPT_IN = "allowWorldAdminAccess"
# Upper bounds no experiment here comes near (the dev stack's largest pool grows to 24 nodes):
# a typo such as an extra three zeros is refused, not planned and priced.
MAX_POOL_NODES = 200
MAX_WORKER_PODS = 1000
MAX_BURST_NODES = 64
MAX_RESULTS_DAYS = 3650
MAX_RAY_RESOURCE = 1000.0
"""Of one custom Ray resource on one node (the pools' largest types have 48 vCPUs)."""
# What every burst node installs next to Ray, at the versions installed here.
BURST_NODE_PACKAGES = ("numpy", "pillow", "boto3")
MIN_KUBERAY = (1, 6, 0)
"""`authOptions.secretName` (token auth) exists from KubeRay 1.6.0 on."""
_INSTANCE_TYPE = r"[a-z][a-z0-9-]*\.[a-z0-9]+"
_REGION = r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_RESOURCE_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
T = TypeVar("T")
ADMIN_CIDR_PLACEHOLDER = "203.0.113.0/24"
"""A documentation range (RFC 5737): what `invoke plan` plans with when adminCidrs is empty."""
_RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_PLACEMENT_CAPACITY = {
    SPOT_RESOURCE: CAPACITY_SPOT,
    ON_DEMAND_RESOURCE: CAPACITY_ON_DEMAND,
    LEARNER_RESOURCE: CAPACITY_ON_DEMAND,
}
"""Placement resources and the capacity their nodes must have (a `spot` unit on an
on-demand node would send preemptible work somewhere it is never preempted, and back)."""


class RequiredConfigMissing(ConfigError):
    """A key the enabled experiments need is not set (worded as Pulumi's own
    `Missing required configuration variable` error)."""


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
    """Validate raw stack config (`namespace:key` -> string or JSON string).

    An experiment's section is required when it is enabled and validated whenever present.
    """
    _reject_unknown_namespaced_keys(raw)
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
    top.reject_unknown(
        {
            "experiments",
            "adminCidrs",
            WORLD_ADMIN_OPT_IN,
            "apiEndpoint",
            "maxHourlyUsd",
            "bucket",
            "spotCluster",
            "burst",
            *RAY_ON_EKS,
        }
    )
    experiments = _experiments(top)
    allow_world = top.boolean(WORLD_ADMIN_OPT_IN) if WORLD_ADMIN_OPT_IN in top.values else False
    admin_cidrs = _admin_cidrs(top, allow_world)
    api_endpoint = _api_endpoint(top)
    ray_version, ray_image = installed_ray_image()
    on_eks = [name for name in experiments if name in RAY_ON_EKS]
    _require_reachable_api(top, on_eks, admin_cidrs, api_endpoint)
    spot_cluster = _section(top, "spotCluster", bool(on_eks), _spot_cluster)
    ray_clusters = {
        name: cluster
        for name in RAY_ON_EKS
        if (cluster := _section(top, name, name in on_eks, _ray_cluster(name))) is not None
    }
    config = SpotburstConfig(
        stack=stack,
        region=region,
        experiments=experiments,
        admin_cidrs=admin_cidrs,
        allow_world_admin_access=allow_world,
        api_endpoint=api_endpoint,
        max_hourly_usd=top.number("maxHourlyUsd", 0.0) if "maxHourlyUsd" in top.values else None,
        bucket=_bucket(top.object("bucket")),
        spot_cluster=spot_cluster,
        ray_clusters={name: ray_clusters[name] for name in on_eks},
        burst=_section(top, "burst", "burst" in experiments, _burst),
        ray_version=ray_version,
        ray_image=ray_image,
        node_packages=pinned_node_packages(),
    )
    if spot_cluster is not None:
        for cluster in ray_clusters.values():
            _reject_pods_that_fit_no_node(spot_cluster, cluster)
    _reject_overlapping_networks(config)
    _reject_shared_namespaces(top, config)
    refuse_over_budget(config)
    return config


AWS_PROVIDER_KEYS = frozenset({
    "accessKey", "allowedAccountIds", "assumeRoleWithWebIdentity", "assumeRoles",
    "customCaBundle", "defaultTags", "endpoints", "forbiddenAccountIds", "httpProxy",
    "httpsProxy", "ignoreTags", "insecure", "maxRetries", "noProxy", "profile", "region",
    "retryMode", "s3UsePathStyle", "secretKey", "sharedConfigFiles", "sharedCredentialsFiles",
    "skipCredentialsValidation", "skipMetadataApiCheck", "skipRegionValidation",
    "skipRequestingAccountId", "stsRegion", "tagPolicyCompliance", "token",
    "tokenBucketRateLimiterCapacity", "useDualstackEndpoint", "useFipsEndpoint", "userAgents",
})
"""The aws provider's own config keys (pulumi-aws's `aws:` namespace)."""
PROVIDER_NAMESPACES = ("aws", "kubernetes", "eks", "random", "pulumi")
"""Namespaces beside ours whose keys a provider or Pulumi itself reads."""


def _reject_unknown_namespaced_keys(raw: Mapping[str, str]) -> None:
    """A key Pulumi would hand to no one (`aws:regionn`, `spotbust:experiments`) is a typo
    that silently changes nothing: refused, with the nearest known key."""
    import difflib

    for key in sorted(raw):
        namespace, _, name = key.partition(":")
        if namespace == PROJECT:
            continue
        if namespace == "aws" and name not in AWS_PROVIDER_KEYS:
            near = difflib.get_close_matches(name, sorted(AWS_PROVIDER_KEYS), n=1)
            hint = f"; did you mean aws:{near[0]}?" if near else ""
            raise ConfigError(f"{key}: unknown key of the aws provider{hint}")
        if namespace not in PROVIDER_NAMESPACES:
            near = difflib.get_close_matches(namespace, [PROJECT, *PROVIDER_NAMESPACES], n=1)
            hint = f"; did you mean {near[0]}:{name}?" if near else ""
            raise ConfigError(f"{key}: unknown namespace {namespace!r} (known: {PROJECT}, "
                              f"{', '.join(PROVIDER_NAMESPACES)}){hint}")


def _section(top: Fields, name: str, required: bool, read: Callable[[Fields], T]) -> T | None:
    if name not in top.values:
        if required:
            raise ConfigError(f"{top.key(name)}: missing (required: the experiment is enabled)")
        return None
    return read(top.object(name))


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


def _admin_cidrs(top: Fields, allow_world: bool) -> tuple[str, ...]:
    cidrs = top.raw("adminCidrs") if "adminCidrs" in top.values else []
    if not isinstance(cidrs, list):
        raise ConfigError(f"{top.key('adminCidrs')}: {cidrs!r} is not a list of CIDR blocks")
    parsed = tuple(parse_cidr(top.key("adminCidrs"), cidr, private=False) for cidr in cidrs)
    world = [cidr for cidr in parsed if world_wide(cidr)]
    if world and not allow_world:
        reach = (
            "the whole internet"
            if ipaddress.ip_network(world[0]).prefixlen == 0
            else f"more of the internet than a /{WORLD_WIDE_PREFIX} of public addresses"
        )
        raise ConfigError(
            f"{top.key('adminCidrs')}: {world[0]} opens the EKS API and SSH to {reach}; list "
            f"your own address (e.g. 203.0.113.7/32), or set {top.key(WORLD_ADMIN_OPT_IN)}: "
            "true if you really mean it"
        )
    return parsed


def _api_endpoint(top: Fields) -> str:
    if "apiEndpoint" not in top.values:
        return API_ENDPOINT_PUBLIC
    allowed = (API_ENDPOINT_PUBLIC, API_ENDPOINT_PRIVATE)
    value = top.raw("apiEndpoint")
    if value not in allowed:
        raise ConfigError(
            f"{top.key('apiEndpoint')}: {value!r} is not allowed; expected {' or '.join(allowed)}"
        )
    return str(value)


def needs_admin_cidrs(raw: Mapping[str, str]) -> bool:
    """Would `raw` be refused for want of adminCidrs (an EKS experiment on, no adminCidrs, no
    `apiEndpoint: private`)? Undecidable values answer False and are left to parse_config."""
    values = {key: _decode(value) for key, value in raw.items()}
    experiments = values.get(f"{PROJECT}:experiments")
    on_eks = isinstance(experiments, list) and any(name in RAY_ON_EKS for name in experiments)
    return (
        on_eks
        and values.get(f"{PROJECT}:adminCidrs") in (None, [])
        and values.get(f"{PROJECT}:apiEndpoint") != API_ENDPOINT_PRIVATE
    )


def with_admin_cidr_placeholder(raw: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """`raw` ready to plan offline: when it lacks adminCidrs the EKS API needs, the
    documentation range ADMIN_CIDR_PLACEHOLDER stands in, and the note says so."""
    if not needs_admin_cidrs(raw):
        return dict(raw), None
    note = (
        f"{PROJECT}:adminCidrs is empty: planned with the placeholder {ADMIN_CIDR_PLACEHOLDER} "
        "(a documentation range); `pulumi up` refuses until you set your own address"
    )
    return {**raw, f"{PROJECT}:adminCidrs": json.dumps([ADMIN_CIDR_PLACEHOLDER])}, note


def _require_reachable_api(
    top: Fields, on_eks: list[str], admin_cidrs: tuple[str, ...], api_endpoint: str
) -> None:
    """Without adminCidrs a public-endpoint deployer could not reach the EKS API it creates:
    `pulumi up` would build the VPC and control plane, then hang installing KubeRay."""
    if not on_eks or admin_cidrs or api_endpoint == API_ENDPOINT_PRIVATE:
        return
    key = top.key("adminCidrs")
    raise RequiredConfigMissing(
        f"Missing required configuration variable '{key}': the EKS experiments "
        f"({', '.join(on_eks)}) need the cluster's API reachable from where you deploy; "
        f"please set a value using the command `pulumi config set --path '{key}[0]' "
        f"<your-ip>/32` (or, deploying from inside the VPC, `pulumi config set "
        f"{top.key('apiEndpoint')} {API_ENDPOINT_PRIVATE}`)"
    )


def _bucket(fields: Fields) -> BucketConfig:
    fields.reject_unknown({"forceDestroy", "versioning", "expireResultsAfterDays"})
    return BucketConfig(
        force_destroy=fields.boolean("forceDestroy"),
        versioning=fields.boolean("versioning"),
        expire_results_after_days=fields.integer("expireResultsAfterDays", 1, MAX_RESULTS_DAYS),
    )


def _spot_cluster(fields: Fields) -> SpotClusterConfig:
    fields.reject_unknown(
        {
            "vpcCidr",
            "azCount",
            "eksVersion",
            "kuberayVersion",
            "clusterAutoscalerVersion",
            "clusterAutoscalerChart",
            "nvidiaDevicePluginVersion",
            "nodePools",
            "drainOnRebalance",
            *SHARED_STORAGE_KEYS,
        }
    )
    eks_version = fields.string("eksVersion", r"1\.\d{2}", 'an EKS version such as "1.34"')
    autoscaler_version = fields.string(
        "clusterAutoscalerVersion", r"1\.\d{2}\.\d+", "a Cluster Autoscaler release such as 1.34.0"
    )
    if autoscaler_version.rsplit(".", 1)[0] != eks_version:
        raise ConfigError(
            f"{fields.key('clusterAutoscalerVersion')}: {autoscaler_version} does not match "
            f"eksVersion {eks_version}; the Cluster Autoscaler's minor version must equal the "
            "cluster's (e.g. 1.34.x for 1.34)"
        )
    pools = fields.object("nodePools")
    pools.reject_unknown(set(NODE_POOLS))
    return SpotClusterConfig(
        vpc_cidr=fields.cidr("vpcCidr", private=True),
        az_count=fields.integer("azCount", 2, 6),
        eks_version=eks_version,
        kuberay_version=_kuberay_version(fields),
        cluster_autoscaler_version=autoscaler_version,
        cluster_autoscaler_chart=fields.string(
            "clusterAutoscalerChart", r"\d+\.\d+\.\d+", "a chart version such as 9.52.1"
        ),
        nvidia_device_plugin_version=fields.string(
            "nvidiaDevicePluginVersion", r"0\.\d+\.\d+", "a chart version such as 0.18.2"
        ),
        node_pools={key: _node_pool(pools, kind) for key, kind in NODE_POOLS.items()},
        drain_on_rebalance=(
            fields.boolean("drainOnRebalance") if "drainOnRebalance" in fields.values else False
        ),
        shared_storage=_shared_storage(fields),
    )


SHARED_STORAGE_KEYS = ("sharedStorage", "sharedThroughputMode", "sharedInfrequentAccessDays")
SHARED_DEFAULTS = {"sharedStorage": "efs", "sharedThroughputMode": "elastic",
                   "sharedInfrequentAccessDays": 30}


def _shared_storage(fields: Fields) -> SharedStorageConfig | None:
    """The shared file system: EFS unless `sharedStorage: none`; its throughput mode and the
    age at which untouched files move to Infrequent Access (0: never)."""
    given = {key: fields.values.get(key, SHARED_DEFAULTS[key]) for key in SHARED_STORAGE_KEYS}
    shared = Fields(fields.path, given)
    kind = shared.string("sharedStorage", "|".join(SHARED_STORAGE_KINDS),
                         " or ".join(SHARED_STORAGE_KINDS))
    mode = shared.string("sharedThroughputMode", "|".join(THROUGHPUT_MODES),
                         " or ".join(THROUGHPUT_MODES))
    days = shared.integer("sharedInfrequentAccessDays", 0, max(INFREQUENT_ACCESS_DAYS))
    if days and days not in INFREQUENT_ACCESS_DAYS:
        raise ConfigError(
            f"{shared.key('sharedInfrequentAccessDays')}: {days} is not allowed; EFS moves "
            f"files after {', '.join(map(str, INFREQUENT_ACCESS_DAYS))} days, or 0 for never"
        )
    if kind == STORAGE_NONE:
        return None
    return SharedStorageConfig(mode, days or None)


def _kuberay_version(fields: Fields) -> str:
    value = fields.string(
        "kuberayVersion", r"1\.\d+\.\d+", "a KubeRay chart version 1.x.y such as 1.7.0"
    )
    if tuple(int(part) for part in value.split(".")) < MIN_KUBERAY:
        raise ConfigError(
            f"{fields.key('kuberayVersion')}: {value} is too old; token auth on every RayCluster "
            f"(authOptions with secretName) needs KubeRay >= {'.'.join(map(str, MIN_KUBERAY))}"
        )
    return value


def _node_pool(pools: Fields, kind: NodePoolKind) -> NodePoolConfig:
    fields = pools.object(kind.key)
    fields.reject_unknown({"instanceTypes", "minSize", "maxSize"})
    what = "EC2 instance types"
    if kind.min_instance_types > 1:
        what += " (spot capacity is diversified over several)"
    instance_types = fields.string_list(
        "instanceTypes", _INSTANCE_TYPE, what, kind.min_instance_types
    )
    unknown = [name for name in instance_types if name not in _instance_shapes()]
    if unknown:
        raise ConfigError(
            f"{fields.key('instanceTypes')}: {unknown[0]} is not in vocab/{INSTANCE_TABLE.name}; "
            "add its vCPUs, memory and GPUs there (they decide which pods fit its nodes) or use "
            "a type listed there"
        )
    low = fields.integer("minSize", 1 if kind.key == HEAD_POOL else 0, MAX_POOL_NODES)
    high = fields.integer("maxSize", max(low, 1), MAX_POOL_NODES)
    return NodePoolConfig(kind, instance_types, low, high)


def _ray_cluster(experiment: str) -> Callable[[Fields], RayClusterConfig]:
    def read(fields: Fields) -> RayClusterConfig:
        fields.reject_unknown({"namespace", "rayAutoscaler", "head", "workerGroups"})
        namespace = fields.string("namespace", _DNS_LABEL, "a Kubernetes namespace name")
        if namespace in _RESERVED_NAMESPACES or namespace.startswith("kuberay"):
            raise ConfigError(
                f"{fields.key('namespace')}: {namespace!r} is not allowed; give the experiment "
                "a namespace of its own"
            )
        groups = fields.raw("workerGroups")
        if not isinstance(groups, list) or not groups:
            raise ConfigError(
                f"{fields.key('workerGroups')}: {groups!r} is not allowed; expected a list of "
                "at least 1 worker group"
            )
        worker_groups = tuple(
            _worker_group(Fields(f"{fields.key('workerGroups')}[{index}]", group))
            for index, group in enumerate(groups)
        )
        names = [group.name for group in worker_groups]
        if len(set(names)) != len(names):
            raise ConfigError(f"{fields.key('workerGroups')}: group names {names} repeat")
        return RayClusterConfig(
            experiment=experiment,
            namespace=namespace,
            ray_autoscaler=fields.boolean("rayAutoscaler"),
            head=_pod_resources(fields.object("head"), set()),
            worker_groups=worker_groups,
        )

    return read


def _worker_group(fields: Fields) -> WorkerGroupConfig:
    extra = {"name", "nodePool", "gpu", "resources", "minReplicas", "replicas", "maxReplicas"}
    resources = _pod_resources(fields, extra)
    name = fields.string("name", _DNS_LABEL, "a lower-case DNS label such as spot-workers")
    node_pool = fields.raw("nodePool")
    if node_pool not in NODE_POOLS:
        raise ConfigError(
            f"{fields.key('nodePool')}: {node_pool!r} is not allowed; expected one of "
            + ", ".join(NODE_POOLS)
        )
    kind = NODE_POOLS[node_pool]
    gpu = fields.integer("gpu", 0, 8)
    if kind.gpu and gpu == 0:
        raise ConfigError(
            f"{fields.key('gpu')}: 0 is not allowed on the GPU pool {node_pool}; its nodes are "
            "tainted nvidia.com/gpu and take only pods that ask for a GPU"
        )
    if not kind.gpu and gpu > 0:
        raise ConfigError(
            f"{fields.key('gpu')}: {gpu} is not allowed on {node_pool}, which has no GPUs; use "
            "learnerGpu or spotGpu"
        )
    placement = _placement(fields.object("resources"), kind)
    low, replicas, high = min_desired_max(
        fields, "worker group", "minReplicas", "replicas", "maxReplicas", MAX_WORKER_PODS
    )
    return WorkerGroupConfig(name, node_pool, resources, gpu, placement, low, replicas, high)


def _placement(fields: Fields, kind: NodePoolKind) -> tuple[tuple[str, float], ...]:
    placement = []
    for name in fields.values:
        if not isinstance(name, str) or re.fullmatch(_RESOURCE_NAME, name) is None:
            raise ConfigError(f"{fields.key(str(name))}: not a Ray resource name")
        needs = _PLACEMENT_CAPACITY.get(name)
        if needs is not None and needs != kind.capacity:
            raise ConfigError(
                f"{fields.key(name)}: the {name!r} placement resource belongs on {needs} "
                f"nodes, but pool {kind.key} is {kind.capacity}"
            )
        placement.append((name, fields.number(name, 0.0, MAX_RAY_RESOURCE)))
    return tuple(placement)


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
        hpc_workers=fields.integer("hpcWorkers", 0, MAX_BURST_NODES),
        cloud_nodes=fields.integer("cloudNodes", 1, MAX_BURST_NODES),
        login_disk_gb=fields.integer("loginDiskGb", 8, 16384),
        worker_disk_gb=fields.integer("workerDiskGb", 8, 16384),
    )


def _pod_resources(fields: Fields, extra_keys: set[str]) -> PodResources:
    fields.reject_unknown({"cpu", "memory"} | extra_keys)
    return PodResources(cpu=fields.quantity("cpu"), memory=fields.quantity("memory"))


@functools.cache
def _instance_shapes() -> dict[str, InstanceShape]:
    return load_instance_shapes()


def _reject_pods_that_fit_no_node(spot: SpotClusterConfig, cluster: RayClusterConfig) -> None:
    """Every Ray pod must fit a node of every instance type its pool may launch, with room
    for the kubelet and the daemon sets: a pod that fits none stays pending forever, and the
    Cluster Autoscaler never grows the pool for it."""
    for pod in cluster.pods():
        types = spot.node_pools[pod.node_pool].instance_types
        beside = ""
        if pod.key.endswith(".head") and cluster.ray_autoscaler:
            beside = " (with the Ray autoscaler's container)"
        elif NODE_POOLS[pod.node_pool].capacity == CAPACITY_SPOT:
            beside = " (with the notice agent's container)"
        for field, asked, unit, rooms in (
            ("cpu", pod.cpus, "CPUs", {name: _cpu_room(name) for name in types}),
            ("memory", pod.memory_gib, "GiB", {name: _memory_room(name) for name in types}),
            ("gpu", pod.gpus, "GPUs", {name: _gpu_room(name) for name in types}),
        ):
            smallest = min(types, key=lambda name: rooms[name][0])
            room, why = rooms[smallest]
            if asked > room:
                raise ConfigError(
                    f"{PROJECT}:{pod.key}.{field}: the pod asks {asked:g} {unit}{beside}; a "
                    f"{pod.node_pool} node of type {smallest} leaves {room:g} to pods ({why}); "
                    "ask for less or give the pool larger instance types"
                )


def _cpu_room(instance_type: str) -> tuple[float, str]:
    shape = _instance_shapes()[instance_type]
    why = f"{shape.vcpus} vCPUs less {NODE_RESERVED_CPU:g} for the kubelet and daemon sets"
    return shape.pod_cpus, why


def _memory_room(instance_type: str) -> tuple[float, str]:
    shape = _instance_shapes()[instance_type]
    return shape.pod_memory_gib, f"{POD_MEMORY_SHARE:.0%} of its {shape.memory_gib:g} GiB"


def _gpu_room(instance_type: str) -> tuple[float, str]:
    shape = _instance_shapes()[instance_type]
    return shape.gpus, f"it has {shape.gpus}"


def _reject_overlapping_networks(config: SpotburstConfig) -> None:
    networks: dict[str, str] = {}
    if config.spot_cluster is not None:
        networks[f"{PROJECT}:spotCluster.vpcCidr"] = config.spot_cluster.vpc_cidr
    if config.burst is not None:
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


def _reject_shared_namespaces(top: Fields, config: SpotburstConfig) -> None:
    owners: dict[str, str] = {}
    for name, cluster in config.ray_clusters.items():
        if cluster.namespace in owners:
            raise ConfigError(
                f"{top.key(name)}.namespace: {cluster.namespace!r} is already the namespace of "
                f"{owners[cluster.namespace]}; every experiment needs its own"
            )
        owners[cluster.namespace] = name


def load_config() -> SpotburstConfig:
    """The validated config of the stack being deployed (or run offline by `invoke plan`)."""
    import pulumi
    from pulumi.runtime.config import CONFIG

    try:
        return parse_config(dict(CONFIG.get()), pulumi.get_stack())
    except ConfigError as error:
        # RunError: Pulumi prints the one line and exits, no traceback, nothing declared.
        # Still a ConfigError to Python callers.
        class StackConfigRefused(ConfigError, pulumi.RunError):
            pass

        raise StackConfigRefused(str(error)) from None
