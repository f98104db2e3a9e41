"""spotburst's only command line: `invoke --list` shows every task.

Each task parses its flags, calls one function of `launch/` and prints the result.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from invoke import Context, Exit, task

from launch import pulumi_cli

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

# --- network emulation and the local two-site lab -----------------------------------------

# --- burst ----------------------------------------------------------------------------------
