"""`invoke plan`: the stack program run offline, printed as a tree with its hourly cost."""

from __future__ import annotations

from collections.abc import Iterable

from launch.costs import CostEstimate, estimate_hourly_cost, load_price_table
from launch.offline import DeclaredResource, OfflineRun, read_stack_config, run_offline

_MULTI_LANGUAGE = ("eks:index:",)


def plan(stack: str) -> tuple[OfflineRun, CostEstimate]:
    run = run_offline(read_stack_config(stack), stack)
    return run, estimate_hourly_cost(run.resources, load_price_table())


def render_plan(run: OfflineRun, cost: CostEstimate) -> str:
    config = run.config
    lines = [
        f"spotburst plan: stack {config.stack!r}, region {config.region}, "
        f"experiments {', '.join(config.experiments)}",
        "(the real stack program, run offline under mocks: nothing is created)",
        "",
    ]
    declared = {resource.urn for resource in run.resources}
    for resource in _sorted(r for r in run.resources if r.parent_urn not in declared):
        lines.extend(_tree(run, resource, depth=0))
    components = sum(1 for r in run.resources if not r.custom)
    lines += ["", f"{len(run.resources)} resources declared ({components} components)", ""]
    lines += _render_outputs(run) + [""] + _render_cost(cost, config.region)
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


def _render_cost(cost: CostEstimate, region: str) -> list[str]:
    lines = [f"Hourly cost estimate (price table of {cost.table_date}, {cost.table_region}):"]
    width = max(len(line.item) for line in cost.lines)
    for line in cost.lines:
        price = f"${line.unit_price:.4f}" if line.unit_price is not None else "unknown"
        lines.append(f"  {line.item:<{width}}  {line.count:>3} x {price:>9}  ${line.hourly:8.3f}")
    lines.append(f"  {'total per hour':<{width}}                  ${cost.hourly_total:8.3f}")
    lines.append(f"  (about ${cost.hourly_total * 24:.2f} per day while it runs)")
    if cost.unpriced:
        lines.append(f"  not priced (add to launch/prices.json): {', '.join(cost.unpriced)}")
    if region != cost.table_region:
        lines.append(f"  note: prices are for {cost.table_region}; this stack is in {region}")
    lines.append("  not included: data transfer, NAT data processing, S3/EBS/EFS storage")
    return lines
