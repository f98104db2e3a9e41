"""spotburst's only command line: `invoke --list` shows every task.

Each task parses its flags, calls one function of `launch/` and prints the result.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from invoke import Context, Exit, task

from launch import pulumi_cli

if TYPE_CHECKING:
    from launch.burst import BurstOptions

STACK_HELP = "Pulumi stack name (config in Pulumi.<stack>.yaml)"


# --- infrastructure (Pulumi) -------------------------------------------------------------


def _pulumi(args: list[str], stack: str, warnings: Iterable[str] = ()) -> None:
    try:
        pulumi_cli.pulumi_executable()
    except pulumi_cli.PulumiCliMissing as missing:
        raise Exit(f"error: {missing}", code=2) from None
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    code = pulumi_cli.run_pulumi(args, stack)
    if code != 0:
        raise Exit(code=code)


@task(help={"stack": STACK_HELP})
def plan(c: Context, stack: str = "dev") -> None:
    """Show what a stack would create and its hourly cost, offline (no Pulumi CLI, no AWS)."""
    from launch.plan import plan as plan_stack
    from launch.plan import render_plan

    print(render_plan(*plan_stack(stack)))


@task(help={"stack": STACK_HELP})
def preview(c: Context, stack: str = "dev") -> None:
    """Preview a deployment with the Pulumi CLI (`pulumi preview`)."""
    _pulumi(["preview"], stack)


@task(help={"stack": STACK_HELP, "yes": "Skip Pulumi's confirmation prompt"})
def up(c: Context, stack: str = "dev", yes: bool = False) -> None:
    """Deploy a stack to AWS (`pulumi up`); warns if the EKS API endpoint would be private."""
    from launch.preflight import deployment_warnings

    _pulumi(["up", *(["--yes"] if yes else [])], stack, deployment_warnings(stack))


@task(help={"stack": STACK_HELP, "yes": "Skip Pulumi's confirmation prompt"})
def destroy(c: Context, stack: str = "dev", yes: bool = False) -> None:
    """Delete everything a stack created (`pulumi destroy`): stops all billing for it."""
    _pulumi(["destroy", *(["--yes"] if yes else [])], stack)


@task(help={"stack": STACK_HELP, "show_secrets": "Also print secret outputs (the kubeconfig)"})
def outputs(c: Context, stack: str = "dev", show_secrets: bool = False) -> None:
    """Print a deployed stack's outputs (what the run tasks use)."""
    _pulumi(["stack", "output", *(["--show-secrets"] if show_secrets else [])], stack)


@task(help={"quick": "Skip mypy (the slowest check) and run ruff and pytest only"})
def test(c: Context, quick: bool = False) -> None:
    """Run the checks CI runs: ruff, mypy over components/stacks/tasks.py, then pytest."""
    python = sys.executable
    c.run(f"{python} -m ruff check .", echo=True)
    if not quick:
        c.run(f"{python} -m mypy", echo=True)
    c.run(f"{python} -m pytest", echo=True)


# --- DOLL ---------------------------------------------------------------------------------

TARGET_HELP = {
    "address": "Ray dashboard address of any cluster, e.g. http://HOST:8265 (runs as a Ray Job)",
    "stack": "Run on this Pulumi stack's DOLL RayCluster (port-forward; results via its bucket)",
    "out": "Local results folder (default results/doll/<timestamp>)",
}


@task(help={
    "policy": "Comma-separated policies: on-demand,static,adaptive (default: all three)",
    "deadline": "Deadline θ/θ₀ (default 1.05)",
    "alpha": "Spot availability α of the preemption chain (default 0.9)",
    "workers": "Number of stream workers N (default 16)",
    "rates": "homogeneous (default) or heterogeneous arrival rates",
    "trace": "AWS describe-spot-price-history JSON (default: the shipped 2021 c5.xlarge trace)",
    "zone": "Availability zone in the trace (default ca-central-1b)",
    "product": "ProductDescription in the trace (default 'SUSE Linux')",
    "on_demand_price": "On-demand price in $/h (default 0.286)",
    "preemption": "markov (default: the worker stops receiving data) or kill (actor killed)",
    "seed": "Seed of preemptions, data streams and initial weights (default 0)",
    **TARGET_HELP,
})
def run_doll(c: Context, policy: str | None = None, deadline: str | None = None,
             alpha: str | None = None, workers: str | None = None, rates: str | None = None,
             trace: str | None = None, zone: str | None = None, product: str | None = None,
             on_demand_price: str | None = None, preemption: str | None = None,
             seed: str | None = None, out: str | None = None, address: str | None = None,
             stack: str | None = None) -> None:
    """Run the DOLL experiment (local Ray by default, --address or --stack); draws figures."""
    from pathlib import Path

    from launch.doll import DollOptions
    from launch.doll import run_doll as run
    from launch.ray_jobs import JobFailed
    from launch.tunnel import TunnelFailed

    options = DollOptions(policy, deadline, alpha, workers, rates,
                          Path(trace) if trace else None, zone, product, on_demand_price,
                          preemption, seed)
    try:
        folder = run(options, address, stack, Path(out) if out else None)
    except (ValueError, TunnelFailed, JobFailed, pulumi_cli.PulumiCliMissing) as error:
        raise Exit(f"error: {error}", code=2) from None
    print(f"results and figures in {folder}")


@task(help={
    "instance_type": "EC2 instance type (default c5.xlarge)",
    "region": "AWS region (default us-east-1)",
    "days": "How many days back from now (default 90)",
    "out": "JSON file to write (default spot-prices/<type>_<region>_<days>d.json)",
    "endpoint_url": "EC2 endpoint URL (only for a local stand-in such as moto_server)",
})
def fetch_prices(c: Context, instance_type: str = "c5.xlarge", region: str = "us-east-1",
                 days: float = 90, out: str | None = None,
                 endpoint_url: str | None = None) -> None:
    """Download a spot price trace (boto3, paginated) in the format run-doll --trace reads."""
    from pathlib import Path

    from launch.spot_prices import fetch_spot_prices

    target = Path(out or f"spot-prices/{instance_type}_{region}_{days:g}d.json")
    try:
        count = fetch_spot_prices(instance_type, region, days, target, endpoint_url)
    except (ValueError, RuntimeError) as error:
        raise Exit(f"error: {error}", code=2) from None
    print(f"wrote {count} records to {target}")


# --- network emulation and the local two-site lab -----------------------------------------

PROFILE_HELP = "Profile name (30m 50m 80m 100m 150m 200m) or a seed-format JSON file"
BW_HELP = ("Cross-site bandwidth in Mbit/s: 30/50/80/100/150/200 pick the seed profile "
           "(31/55/83/106/160/210), any other positive number shapes to exactly that")
KIND_HELP = ("auto (netns when root, else process), netns (namespaces + tc) or process "
             "(one namespace, user-space throttling)")


def _netem_errors() -> tuple[type[Exception], ...]:
    from launch.netem_aws import StackOutputsError
    from netem.lab import LabNotFound
    from netem.profile import ProfileError

    return (ProfileError, LabNotFound, StackOutputsError, ValueError,
            pulumi_cli.PulumiCliMissing)


@task(help={"bw": BW_HELP, "profile": PROFILE_HELP, "kind": KIND_HELP,
            "cloud_nodes": "Number of cloud Ray nodes (1-8)",
            "hpc_cpus": "CPUs the HPC worker node offers to Ray",
            "cloud_cpus": "CPUs each cloud node offers to Ray"})
def lab_up(c: Context, bw: str | None = None, profile: str | None = None, kind: str = "auto",
           cloud_nodes: int = 1, hpc_cpus: int = 2, cloud_cpus: int = 2) -> None:
    """Bring the local two-site lab up and leave it running; prints its description (JSON)."""
    import json

    from launch.lab import lab_up as start

    try:
        lab = start(bw, profile, kind, cloud_nodes, hpc_cpus, cloud_cpus)
    except _netem_errors() as error:
        raise Exit(f"error: {error}", code=2) from None
    print(json.dumps(lab.to_dict(), indent=2))
    print(f"lab {lab.lab_id} is up; run the driver on-prem with the prefix in "
          f"site_prefixes.onprem; remove it with `invoke lab-down --lab {lab.lab_id}`",
          file=sys.stderr)


@task(help={"lab": "Lab id (needed only when several labs are up)"})
def lab_down(c: Context, lab: str | None = None) -> None:
    """Remove a lab: its processes, namespaces and temp dir, exactly what lab-up created."""
    from launch.lab import lab_down as stop

    try:
        removed = stop(lab)
    except _netem_errors() as error:
        raise Exit(f"error: {error}", code=2) from None
    print("\n".join(f"removed {item}" for item in removed))


@task(help={"lab": "Lab id (needed only when several labs are up)"})
def lab_status(c: Context, lab: str | None = None) -> None:
    """Show a lab's description and which of its processes and namespaces are alive."""
    from launch.lab import lab_report

    try:
        print(lab_report(lab))
    except _netem_errors() as error:
        raise Exit(f"error: {error}", code=2) from None


@task(help={"bw": BW_HELP, "profile": PROFILE_HELP, "kind": KIND_HELP,
            "out": "Directory for link.json (default results/measure-link/<timestamp>)",
            "seconds": "Seconds of streaming per direction"})
def measure_link(c: Context, bw: str | None = None, profile: str | None = None,
                 out: str | None = None, kind: str = "auto", seconds: float = 4.0) -> None:
    """Bring a lab up, measure the link both ways with a TCP stream, tear it down, print."""
    import time

    from launch.lab import measure

    out = out or f"results/measure-link/{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        _, table = measure(bw, profile, out, kind, seconds)
    except _netem_errors() as error:
        raise Exit(f"error: {error}", code=2) from None
    print(table)
    print(f"wrote {out}/link.json")


@task(help={"stack": STACK_HELP, "bw": BW_HELP, "profile": PROFILE_HELP,
            "reset": "Remove the shaping from every burst node instead"})
def netem(c: Context, stack: str = "dev", bw: str | None = None, profile: str | None = None,
          reset: bool = False) -> None:
    """Apply a bandwidth profile on the burst stack's login, HPC and cloud nodes via SSM."""
    from launch.netem_aws import format_statuses, netem_on_stack
    from netem.profile import load_profile

    try:
        if reset and (bw or profile):
            raise ValueError("give --reset alone, or a profile/--bw without --reset")
        statuses = netem_on_stack(stack, None if reset else load_profile(profile, bw))
    except _netem_errors() as error:
        raise Exit(f"error: {error}", code=2) from None
    print(format_statuses(statuses))
    if not all(status.ok for status in statuses):
        raise Exit("error: a node failed (see above); the others were reset", code=1)


# --- burst ----------------------------------------------------------------------------------

BURST_SIZES_HELP = "(default: the workload's, sized for a few minutes at 30 Mbit/s)"
BURST_HELP = {
    "workload": "image (per-image transform) or param-server (per-directory gradients)",
    "data": "nfs (inputs on the on-prem file system) or s3 (inputs in a bucket)",
    "scheduler": "default (plain Ray placement), data-aware (streaming) or both",
    "out": "Results folder (default results/burst/<timestamp>)",
    "stack": "Run on this Pulumi stack's burst nodes instead of the local lab",
    "images": f"image workload: number of images {BURST_SIZES_HELP}",
    "image_side": f"image workload: side of each generated image in pixels {BURST_SIZES_HELP}",
    "directories": f"param-server workload: directories, one task each {BURST_SIZES_HELP}",
    "images_per_directory": f"param-server workload: images per directory {BURST_SIZES_HELP}",
    "task_cpus": "CPUs each task reserves (default: a whole worker node)",
    "seed": "Seed of the generated inputs (default 0)",
    "kind": KIND_HELP,
    "cloud_nodes": "Local lab: number of cloud Ray nodes (1-8)",
    "hpc_cpus": "Local lab: CPUs of the HPC worker node",
    "cloud_cpus": "Local lab: CPUs of each cloud node",
}


def _burst_options(workload: str, data: str, scheduler: str, images: int | None,
                   image_side: int | None, directories: int | None,
                   images_per_directory: int | None, task_cpus: int | None, seed: int | None,
                   kind: str, cloud_nodes: int, hpc_cpus: int, cloud_cpus: int) -> BurstOptions:
    from launch.burst import BurstOptions

    def number(value: int | None) -> int | None:  # invoke hands optional ints over as text
        return None if value is None else int(value)

    return BurstOptions(workload, data, scheduler, number(images), number(image_side),
                        number(directories), number(images_per_directory), number(task_cpus),
                        number(seed), kind, cloud_nodes, hpc_cpus, cloud_cpus)


def _burst_errors() -> tuple[type[Exception], ...]:
    from launch.targets import TargetError

    return (*_netem_errors(), TargetError, RuntimeError)


@task(help={"bw": BW_HELP, **BURST_HELP})
def run_burst(c: Context, bw: str = "30", workload: str = "image", data: str = "nfs",
              scheduler: str = "both", out: str | None = None, stack: str | None = None,
              images: int | None = None, image_side: int | None = None,
              directories: int | None = None, images_per_directory: int | None = None,
              task_cpus: int | None = None, seed: int | None = None, kind: str = "auto",
              cloud_nodes: int = 1, hpc_cpus: int = 2, cloud_cpus: int = 2) -> None:
    """Burst workload at --bw Mbit/s: local two-site lab (default) or --stack; a table per
    scheduler, results and figures in --out."""
    from pathlib import Path

    from launch.burst import run_burst as run

    try:
        options = _burst_options(workload, data, scheduler, images, image_side, directories,
                                 images_per_directory, task_cpus, seed, kind, cloud_nodes,
                                 hpc_cpus, cloud_cpus)
        folder = run(options, bw, Path(out) if out else None, stack)
    except _burst_errors() as error:
        raise Exit(f"error: {error}", code=2) from None
    print(f"results and figures: {folder}")


@task(help={"bw": "Comma-separated bandwidths in Mbit/s, e.g. 30,50,100,150,200",
            **BURST_HELP, "out": "Sweep folder (default results/burst-sweep/<timestamp>)"})
def sweep_burst(c: Context, bw: str = "30,50,100,150,200", workload: str = "image",
                data: str = "nfs", scheduler: str = "both", out: str | None = None,
                stack: str | None = None, images: int | None = None,
                image_side: int | None = None, directories: int | None = None,
                images_per_directory: int | None = None, task_cpus: int | None = None,
                seed: int | None = None, kind: str = "auto", cloud_nodes: int = 1,
                hpc_cpus: int = 2, cloud_cpus: int = 2) -> None:
    """run-burst at each bandwidth, then a makespan-vs-bandwidth figure."""
    from pathlib import Path

    from launch.burst import sweep_burst as sweep

    bandwidths = [part.strip() for part in bw.split(",") if part.strip()]
    try:
        options = _burst_options(workload, data, scheduler, images, image_side, directories,
                                 images_per_directory, task_cpus, seed, kind, cloud_nodes,
                                 hpc_cpus, cloud_cpus)
        folder = sweep(options, bandwidths, Path(out) if out else None,
                       stack)
    except _burst_errors() as error:
        raise Exit(f"error: {error}", code=2) from None
    print(f"sweep results and makespan_vs_bandwidth.png: {folder}")



# --- AWS account: preflight and leftovers (launch/account) ------------------------------------

ENDPOINT_HELP = "AWS endpoint URL (only for a local stand-in such as moto_server)"


@task(help={"stack": STACK_HELP, "endpoint_url": ENDPOINT_HELP})
def preflight(c: Context, stack: str = "dev", endpoint_url: str | None = None) -> None:
    """Check AWS credentials, region, Pulumi login, kubectl and the Service Quotas the stack
    needs at maximum scale; exit 2 listing each failed check with its fix."""
    from launch.account.checks import failures, render_preflight
    from launch.account.stack import preflight_stack

    print(f"preflight: planning stack {stack!r} offline, then asking AWS...", file=sys.stderr)
    try:
        results, region = preflight_stack(stack, endpoint_url)
    except FileNotFoundError as error:
        raise Exit(f"error: {error}", code=2) from None
    report = render_preflight(results, stack, region)
    if failures(results):
        raise Exit(report, code=2)
    print(report)


@task(help={"stack": STACK_HELP, "endpoint_url": ENDPOINT_HELP})
def leftovers(c: Context, stack: str = "dev", endpoint_url: str | None = None) -> None:
    """List what of a stack is still billable in its region (tagged with the stack or named
    after its EKS cluster), each with the AWS CLI command that deletes it; exit 1 if any."""
    from launch.account.leftovers import render_leftovers
    from launch.account.stack import leftovers_for_stack
    from stacks.fields import ConfigError

    print(f"leftovers: listing what stack {stack!r} may have left in its region...",
          file=sys.stderr)
    try:
        report = leftovers_for_stack(stack, endpoint_url)
    except (FileNotFoundError, ConfigError) as error:
        raise Exit(f"error: {error}", code=2) from None
    if not report.clean:
        raise Exit(render_leftovers(report), code=1)
    print(render_leftovers(report))
