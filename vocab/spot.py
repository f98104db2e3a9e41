"""The spot cluster's vocabulary: node pools, capacity labels, placement resources, the notice.

Shared by the AWS spot cluster (its KubeRay worker groups and EKS node groups), the local spot
lab and the spot workloads (elastic training, RL, inference), so a worker placed with
`resources={SPOT_RESOURCE: 1}` lands on a spot node wherever it runs. Pure constants and tiny
functions: no Ray, no Pulumi.

A node carries two labels, `capacity` (how it is bought) and `pool` (which node group it is
in), and one placement resource named after its pool's purpose, one unit per CPU, so that a
task asking for `num_cpus=k, resources={SPOT_RESOURCE: k}` fits exactly where CPUs are free.
"""

from __future__ import annotations

LABEL_CAPACITY = "capacity"
"""Node label: how the node is bought, one of CAPACITIES."""
CAPACITY_SPOT = "spot"
CAPACITY_ON_DEMAND = "on-demand"
CAPACITIES = (CAPACITY_SPOT, CAPACITY_ON_DEMAND)

LABEL_POOL = "pool"
"""Node label: the node group (KubeRay worker group / EKS node group) the node belongs to."""
POOL_HEAD = "head"
"""The Ray head: on-demand, runs the GCS and the drivers; offers no placement resource."""
POOL_ON_DEMAND = "on-demand"
"""On-demand workers: what must not be preempted (coordinators, parameter servers)."""
POOL_SPOT = "spot"
"""Spot workers: preemptible, get a notice `SPOT_WARNING_S` before they are terminated."""
POOL_LEARNER = "learner"
"""The RL learner's node: on-demand (a GPU node on AWS)."""
POOLS = (POOL_HEAD, POOL_ON_DEMAND, POOL_SPOT, POOL_LEARNER)

POOL_CAPACITY = {
    POOL_HEAD: CAPACITY_ON_DEMAND,
    POOL_ON_DEMAND: CAPACITY_ON_DEMAND,
    POOL_SPOT: CAPACITY_SPOT,
    POOL_LEARNER: CAPACITY_ON_DEMAND,
}

SPOT_RESOURCE = "spot"
"""Placement resource on spot nodes, one unit per CPU."""
ON_DEMAND_RESOURCE = "on_demand"
"""Placement resource on on-demand worker nodes, one unit per CPU."""
LEARNER_RESOURCE = "learner"
"""Placement resource on the learner's node, one unit per CPU."""
POOL_RESOURCE = {
    POOL_ON_DEMAND: ON_DEMAND_RESOURCE,
    POOL_SPOT: SPOT_RESOURCE,
    POOL_LEARNER: LEARNER_RESOURCE,
}

SPOT_WARNING_S = 120.0
"""AWS gives a spot instance this much notice before it terminates it."""

IMDS_ENDPOINT = "http://169.254.169.254"
"""The EC2 instance metadata service (IMDSv2: a session token first)."""
IMDS_ENDPOINT_ENV = "SPOTBURST_IMDS_ENDPOINT"
"""Environment variable that points a node's processes at another metadata endpoint (the
spot lab sets it on each node to that node's own notice endpoint)."""
IMDS_TOKEN_PATH = "/latest/api/token"
IMDS_TOKEN_TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
IMDS_TOKEN_HEADER = "X-aws-ec2-metadata-token"
IMDS_INSTANCE_ACTION_PATH = "/latest/meta-data/spot/instance-action"
IMDS_REBALANCE_PATH = "/latest/meta-data/events/recommendations/rebalance"
"""404 until EC2 recommends rebalancing away from the instance, then `{"noticeTime": "...Z"}`."""
IMDS_INSTANCE_ID_PATH = "/latest/meta-data/instance-id"
NOTICE_ACTIONS = ("terminate", "stop", "hibernate")
"""The `action` values AWS puts in an instance-action notice."""


def pool_capacity(pool: str) -> str:
    """The capacity type (spot or on-demand) of a pool's nodes."""
    if pool not in POOL_CAPACITY:
        raise ValueError(f"pool {pool!r} is not one of {', '.join(POOLS)}")
    return POOL_CAPACITY[pool]


def node_labels(pool: str) -> dict[str, str]:
    """The Ray node labels of a node in `pool`."""
    return {LABEL_CAPACITY: pool_capacity(pool), LABEL_POOL: pool}


def placement_resources(pool: str, num_cpus: int) -> dict[str, float]:
    """The custom resources of a node in `pool` with `num_cpus` CPUs (none on the head)."""
    if num_cpus < 0:
        raise ValueError(f"num_cpus must be >= 0, got {num_cpus}")
    pool_capacity(pool)
    resource = POOL_RESOURCE.get(pool)
    return {resource: float(num_cpus)} if resource and num_cpus else {}


NOTICE_AGENT_MODULE = "workloads.common.notice_agent"
"""The notice agent beside Ray on every spot node (`python -m` it)."""
NOTICE_AGENT_FILES = (
    "vocab/__init__.py",
    "vocab/spot.py",
    "vocab/spot_budget.py",
    "workloads/__init__.py",
    "workloads/common/__init__.py",
    "workloads/common/spot_notice.py",
    "workloads/common/ray_private.py",
    "workloads/common/notice_agent.py",
)
"""The project files the agent needs beside Ray (paths from the repository's root): what a
spot pod mounts for it, as Ray's image holds Ray but not this project."""
