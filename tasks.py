"""spotburst's only command line: `invoke --list` shows every task.

Each task parses its flags, calls one function of `launch/` and prints the result.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterable
from typing import Any

from invoke import Context, Exit, Task, task

from launch import pulumi_cli
from launch.options import (
    BURST_LAB_SPEC,
    BURST_RUN_SPEC,
    BURST_SWEEP_SPEC,
    BW_HELP,
    TARGET_SPEC,
    BurstLabOptions,
    BurstRunTarget,
    BurstSweepTarget,
    TargetOptions,
)
from workloads.burst.options import BURST_SPEC, BurstOptions
from workloads.common.options import OptionError, OptionSpec
from workloads.doll.options import DOLL_SPEC, DollOptions

STACK_HELP = "Pulumi stack name (config in Pulumi.<stack>.yaml)"


def options_task(*specs: OptionSpec[Any]) -> Callable[[Callable[..., None]], Task]:
    """A task whose flags and help are the user options of `specs`; its body gets the
    context, then one checked options object per spec. A bad value ends the task with one
    line naming the flag, exit code 2, before anything starts."""
    flags = [flag for spec in specs for flag in spec.task_flags()]
    if len({dest for dest, _, _ in flags}) != len(flags):
        raise TypeError(f"the specs {[s.cls.__name__ for s in specs]} share a flag")

    def decorate(body: Callable[..., None]) -> Task:
        def run(c: Context, **given: Any) -> None:
            try:
                values = [
                    spec.from_text({dest: given.get(dest) for dest, _, _ in spec.task_flags()})
                    for spec in specs
                ]
            except OptionError as error:
                raise Exit(f"error: {error}", code=2) from None
            body(c, *values)

        parameters = [inspect.Parameter("c", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        keyword = inspect.Parameter.KEYWORD_ONLY
        parameters += [
            inspect.Parameter(dest, keyword, default=False if switch else None)
            for dest, switch, _ in flags
        ]
        run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        run.__name__ = run.__qualname__ = body.__name__
        run.__doc__ = body.__doc__
        run.__module__ = body.__module__
        # long flags only: a run task has more flags than letters for invoke's short ones
        return task(help={dest: text for dest, _, text in flags}, auto_shortflags=False)(run)

    return decorate


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


@options_task(DOLL_SPEC, TARGET_SPEC)
def run_doll(c: Context, options: DollOptions, target: TargetOptions) -> None:
    """Run the DOLL experiment (local Ray by default, --address or --stack); draws figures."""
    from launch.doll import run_doll as run
    from launch.ray_jobs import JobFailed
    from launch.tunnel import TunnelFailed

    try:
        folder = run(options, target)
    except (ValueError, TunnelFailed, JobFailed, pulumi_cli.PulumiCliMissing) as error:
        raise Exit(f"error: {error}", code=2) from None
    except RuntimeError as error:  # the workload failed; its own output said why
        raise Exit(f"error: {error}", code=1) from None
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


def _burst_errors() -> tuple[type[Exception], ...]:
    from launch.targets import TargetError

    return (*_netem_errors(), TargetError, RuntimeError)


@options_task(BURST_SPEC, BURST_RUN_SPEC, BURST_LAB_SPEC)
def run_burst(c: Context, options: BurstOptions, target: BurstRunTarget,
              lab: BurstLabOptions) -> None:
    """Burst workload at --bw Mbit/s: local two-site lab (default) or --stack; a table per
    scheduler, results and figures in --out."""
    from launch.burst import run_burst as run

    try:
        folder = run(options, target.bw, target.out, target.stack, lab=lab)
    except _burst_errors() as error:
        raise Exit(f"error: {error}", code=2) from None
    print(f"results and figures: {folder}")


@options_task(BURST_SPEC, BURST_SWEEP_SPEC, BURST_LAB_SPEC)
def sweep_burst(c: Context, options: BurstOptions, target: BurstSweepTarget,
                lab: BurstLabOptions) -> None:
    """run-burst at each bandwidth, then a makespan-vs-bandwidth figure."""
    from launch.burst import sweep_burst as sweep

    try:
        folder = sweep(options, target.bw, target.out, target.stack, lab=lab)
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
