"""`invoke plan`: the stack program run offline, printed as a tree with its hourly cost."""

from __future__ import annotations

from collections.abc import Iterable

from launch.offline import DeclaredResource, OfflineRun, run_offline
from launch.stack_config import read_stack_config
from stacks import outputs
from stacks.config import with_admin_cidr_placeholder
from stacks.config_types import NODE_POOLS
from stacks.costs import CostEstimate, hourly_cost
from vocab.prices import load_price_table
from vocab.shared_data import SHARED_ENV, SHARED_MOUNT_PATH

_MULTI_LANGUAGE = ("eks:index:",)


def plan(stack: str) -> tuple[OfflineRun, CostEstimate, str | None]:
    """The offline run, its cost, and a note when a placeholder stood in for adminCidrs."""
    raw, note = with_admin_cidr_placeholder(read_stack_config(stack))
    run = run_offline(raw, stack)
    return run, hourly_cost(run.config, load_price_table()), note


def render_plan(run: OfflineRun, cost: CostEstimate, note: str | None = None) -> str:
    config = run.config
    lines = [
        f"spotburst plan: stack {config.stack!r}, region {config.region}, "
        f"experiments {', '.join(config.experiments)}",
        "(the real stack program, run offline under mocks: nothing is created)",
        *([f"note: {note}"] if note else []),
        "",
    ]
    declared = {resource.urn for resource in run.resources}
    for resource in _sorted(r for r in run.resources if r.parent_urn not in declared):
        lines.extend(_tree(run, resource, depth=0))
    components = sum(1 for r in run.resources if not r.custom)
    lines += ["", f"{len(run.resources)} resources declared ({components} components)", ""]
    lines += _render_spot_cluster(run) + _render_outputs(run) + [""]
    lines += _render_cost(cost, config.region)
    return "\n".join(lines)


def _sorted(resources: Iterable[DeclaredResource]) -> list[DeclaredResource]:
    return sorted(resources, key=lambda resource: (resource.type, resource.name))


def _tree(run: OfflineRun, resource: DeclaredResource, depth: int) -> list[str]:
    note = ""
    if resource.type.startswith(_MULTI_LANGUAGE):
        note = "  (its own children are created by pulumi-eks)"
    lines = [f"{'  ' * depth}{resource.type}  {resource.name}{note}"]
    for child in _sorted(run.children_of(resource.urn)):
        lines.extend(_tree(run, child, depth + 1))
    return lines


def _render_outputs(run: OfflineRun) -> list[str]:
    lines = ["Stack outputs:"]
    for key, value in run.outputs.items():
        shown = "[secret]" if key in run.secret_outputs else value
        lines.append(f"  {key}: {shown}")
    return lines


def _render_spot_cluster(run: OfflineRun) -> list[str]:
    config = run.config
    spot = config.spot_cluster
    if spot is None or not config.ray_clusters:
        return []
    lines = [
        f"Shared spot cluster {run.outputs.get(outputs.SPOT_CLUSTER_NAME, '?')} "
        f"(EKS {spot.eks_version}, KubeRay {spot.kuberay_version}, Cluster Autoscaler "
        f"{spot.cluster_autoscaler_version}), VPC {spot.vpc_cidr}:",
        "  node pools (the Cluster Autoscaler keeps each between min and max):",
    ]
    for pool in spot.used_pools(config.ray_clusters):
        gpu = ", GPU (tainted nvidia.com/gpu)" if pool.kind.gpu else ""
        lines.append(
            f"    {pool.kind.name:<12} {pool.kind.capacity:<9} {'|'.join(pool.instance_types):<34}"
            f" {pool.min_size}-{pool.max_size} nodes{gpu}"
        )
    shared = spot.shared_storage
    if shared is not None:
        aging = (f", Infrequent Access after {shared.infrequent_access_after_days} days"
                 if shared.infrequent_access_after_days else "")
        lines.append(f"  shared data: one encrypted EFS ({shared.throughput_mode} throughput"
                     f"{aging}) at {SHARED_MOUNT_PATH} in every Ray pod ({SHARED_ENV})")
    else:
        lines.append("  shared data: none (sharedStorage: none)")
    for experiment, ray in config.ray_clusters.items():
        autoscaler = "Ray autoscaler on" if ray.ray_autoscaler else "fixed replicas"
        lines.append(
            f"  RayCluster {experiment!r} in namespace {ray.namespace!r} ({autoscaler}, token "
            f"auth): head {ray.head.cpu} CPU/{ray.head.memory} on pool head"
        )
        for group in ray.worker_groups:
            gpu = f"/{group.gpu} GPU" if group.gpu else ""
            placement = ", ".join(f"{name}={value:g}" for name, value in group.placement)
            lines.append(
                f"    worker group {group.name:<22} pool {NODE_POOLS[group.node_pool].name:<12}"
                f" {group.min_replicas}-{group.max_replicas} pods of {group.resources.cpu} CPU/"
                f"{group.resources.memory}{gpu}" + (f"  resources {placement}" if placement else "")
            )
    return lines + [""]


def _render_cost(cost: CostEstimate, region: str) -> list[str]:
    lines = [f"Hourly cost estimate (price table of {cost.table_date}, {cost.table_region}):"]
    width = max(len(line.item) for line in cost.lines)
    lines.append(
        f"  {'':<{width}}  {'unit $/h':>9}   {'min':>3}  {'$/h':>8}   {'max':>3}  {'$/h':>8}"
    )
    for line in cost.lines:
        price = f"{line.unit_price:.4f}" if line.unit_price is not None else "unknown"
        lines.append(
            f"  {line.item:<{width}}  {price:>9}   {line.count_min:>3}  {line.hourly_min:8.3f}"
            f"   {line.count_max:>3}  {line.hourly_max:8.3f}"
        )
    lines.append(
        f"  {'total per hour':<{width}}  {'':>9}        {cost.hourly_min:8.3f}"
        f"        {cost.hourly_max:8.3f}"
    )
    lines.append(
        f"  at minimum scale (pools at minSize or what always-on Ray pods need): "
        f"${cost.hourly_min:.3f} per hour"
    )
    lines.append(f"  at maximum scale (every pool at maxSize): ${cost.hourly_max:.3f} per hour")
    per_day = f"${cost.hourly_min * 24:.2f} to ${cost.hourly_max * 24:.2f}"
    lines.append(f"  (about {per_day} per day while it runs)")
    if cost.unpriced:
        lines.append(f"  not priced (add to vocab/prices.json): {', '.join(cost.unpriced)}")
    if region != cost.table_region:
        lines.append(f"  note: prices are for {cost.table_region}; this stack is in {region}")
    for text in cost.per_gb:
        lines.append(f"  plus {text}")
    lines.append("  not included: data transfer, NAT data processing, S3/EBS storage, burst EFS")
    return lines
