"""`invoke up`'s gate before `pulumi up`: every preflight check, then the plan's hourly cost
at both scales for the budget prompt.

The gate runs in a process of its own (`python -m launch.account.deploy_gate STACK`, one JSON
object on stdout): planning imports launch/offline.py, which patches the Pulumi SDK for
mocks, and the task process that goes on to run `pulumi up` must never carry that patch.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from vocab.errors import UserError

PROJECT_DIR = Path(__file__).resolve().parents[2]


class GateError(UserError, RuntimeError):
    """The gate could not run at all (no config file for the stack, one that is not plain
    YAML, a crash): one line."""


@dataclass(frozen=True)
class GateResult:
    report: str
    """The preflight report: one line per check, each failing one with its fix."""
    passed: bool
    hourly_min: float | None
    """The plan's $/h at minimum scale (None when the preflight failed: not planned)."""
    hourly_max: float | None


def run_gate(stack: str, endpoint_url: str | None = None) -> GateResult:
    """The gate in this process (imports launch/offline.py: a subprocess's job)."""
    from launch.account.checks import failures, render_preflight
    from launch.account.stack import preflight_stack
    from launch.plan import plan

    results, region = preflight_stack(stack, endpoint_url)
    report = render_preflight(results, stack, region)
    if failures(results):
        return GateResult(report, False, None, None)
    _, cost, _ = plan(stack)
    return GateResult(report, True, cost.hourly_min, cost.hourly_max)


def gate_in_subprocess(stack: str, endpoint_url: str | None = None) -> GateResult:
    """run_gate in a fresh Python process; its progress goes to this process's stderr."""
    command = [sys.executable, "-m", "launch.account.deploy_gate", stack]
    if endpoint_url:
        command += ["--endpoint-url", endpoint_url]
    completed = subprocess.run(
        command, cwd=PROJECT_DIR, stdout=subprocess.PIPE, text=True, check=False
    )
    try:
        answer = json.loads(completed.stdout)
    except json.JSONDecodeError:
        raise GateError(
            f"the deployment gate exited {completed.returncode} without an answer (see above)"
        ) from None
    if "error" in answer:
        raise GateError(str(answer["error"]))
    return GateResult(**answer)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("stack")
    parser.add_argument("--endpoint-url")
    args = parser.parse_args(argv)
    try:
        result = run_gate(args.stack, args.endpoint_url)
    except (FileNotFoundError, UserError) as error:
        print(json.dumps({"error": str(error)}))
        return 2
    print(json.dumps(asdict(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
