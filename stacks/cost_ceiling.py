"""`spotburst:maxHourlyUsd`: the stack's hourly cost at maximum scale, from its config alone,
so the program can refuse it before declaring anything.

Counts what the components declare (kept equal to `launch/costs.py`'s count over the offline
plan by tests/infra/test_deploy_guards.py): the spot cluster's control plane, NAT gateway
with its Elastic IP, secrets KMS key, every used pool at maxSize and the GCS Redis nodes of
the fault-tolerant RayClusters; the burst sites' NAT
gateway and Elastic IP (on-prem private subnet), Ray token KMS key and on-demand instances,
the login and cloud nodes with a public IPv4 address each. Prices: `vocab/prices.py`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from stacks.fields import ConfigError
from vocab.prices import kms_key_hourly, load_price_table, node_price
from vocab.spot import CAPACITY_SPOT

if TYPE_CHECKING:  # stacks.config calls refuse_over_budget at the end of parse_config
    from stacks.config import SpotburstConfig

MAX_HOURLY_KEY = "spotburst:maxHourlyUsd"


def max_scale_hourly_usd(config: SpotburstConfig, table: Mapping[str, Any]) -> float:
    """$/h with every node pool at maxSize. Raises ConfigError naming an unpriced type."""
    fixed = table["hourly"]
    nat_with_address = fixed["nat_gateway"] + fixed["public_ipv4_address"]
    total = 0.0

    def nodes(count: int, instance_types: tuple[str, ...], spot: bool) -> float:
        price = node_price(table["instances"], instance_types, spot)
        if price is None:
            raise ConfigError(
                f"{MAX_HOURLY_KEY}: cannot price {'|'.join(instance_types)}; add it to "
                "vocab/prices.json or remove maxHourlyUsd"
            )
        return count * price

    if config.spot_cluster is not None and config.ray_clusters:
        total += fixed["eks_control_plane"] + nat_with_address + kms_key_hourly(table)
        for pool in config.spot_cluster.used_pools(config.ray_clusters):
            spot = pool.kind.capacity == CAPACITY_SPOT
            total += nodes(pool.max_size, pool.instance_types, spot)
        total += _gcs_redis_hourly(config, table)
    burst = config.burst
    if burst is not None and "burst" in config.experiments:
        total += nat_with_address + kms_key_hourly(table)
        instances = burst.login_nodes + burst.hpc_workers + burst.cloud_nodes
        total += nodes(instances, (burst.instance_type,), spot=False)
        total += (burst.login_nodes + burst.cloud_nodes) * fixed["public_ipv4_address"]
    return total


def _gcs_redis_hourly(config: SpotburstConfig, table: Mapping[str, Any]) -> float:
    from components.gcs_redis import NODE_COUNT, NODE_TYPE
    from stacks.spot_cluster import GCS_FAULT_TOLERANT

    redises = sum(1 for experiment in config.ray_clusters if experiment in GCS_FAULT_TOLERANT)
    if not redises:
        return 0.0
    if NODE_TYPE not in table["elasticache"]:
        raise ConfigError(f"{MAX_HOURLY_KEY}: cannot price ElastiCache {NODE_TYPE}; add it to "
                          "vocab/prices.json or remove maxHourlyUsd")
    return float(redises * NODE_COUNT * table["elasticache"][NODE_TYPE])


def refuse_over_budget(config: SpotburstConfig) -> None:
    """Raise ConfigError when the stack may cost more per hour than maxHourlyUsd allows."""
    if config.max_hourly_usd is None:
        return
    cost = max_scale_hourly_usd(config, load_price_table())
    if cost > config.max_hourly_usd:
        enough = math.ceil(cost * 100) / 100
        raise ConfigError(
            f"{MAX_HOURLY_KEY}: the stack costs up to ${cost:.2f} per hour at maximum "
            f"scale (every node pool at maxSize), above the ${config.max_hourly_usd:.2f} "
            "allowed; lower the pools' maxSize or raise the limit: "
            f"pulumi config set {MAX_HOURLY_KEY} {enough:.2f}"
        )
