"""The Pulumi CLI, wrapped: the run tasks read stack outputs through it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from vocab.errors import UserError

PROJECT_DIR = Path(__file__).resolve().parent.parent
INSTALL_HINT = (
    "the Pulumi CLI is not installed: install it with "
    "`curl -fsSL https://get.pulumi.com | sh` (or see https://www.pulumi.com/docs/install/)"
)


class PulumiError(UserError, RuntimeError):
    """The Pulumi CLI is missing or failed; the message is one line a task can print."""


class PulumiCliMissing(PulumiError):
    """Raised when a task needs the `pulumi` executable and it is not on PATH."""


class PulumiCliFailed(PulumiError):
    """`pulumi ...` exited non-zero (no backend, unknown stack, ...): its stderr, one line."""


def pulumi_executable() -> str:
    found = shutil.which("pulumi")
    if found is None:
        raise PulumiCliMissing(INSTALL_HINT)
    return found


def run_pulumi(args: list[str], stack: str) -> int:
    """Run `pulumi <args> --stack <stack>` in the project directory, streaming its output."""
    command = [pulumi_executable(), *args, "--stack", stack]
    return subprocess.run(command, cwd=PROJECT_DIR, check=False).returncode


def stack_outputs(stack: str, show_secrets: bool = False) -> dict[str, Any]:
    """The stack's outputs as a dict (secrets shown only when asked)."""
    command = [pulumi_executable(), "stack", "output", "--json", "--stack", stack]
    if show_secrets:
        command.append("--show-secrets")
    completed = subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True)
    if completed.returncode != 0:
        raise PulumiCliFailed(
            f"`pulumi stack output --stack {stack}` failed: {_last_line(completed)}"
        )
    try:
        outputs: dict[str, Any] = json.loads(completed.stdout)
    except json.JSONDecodeError:
        raise PulumiCliFailed(
            f"`pulumi stack output --stack {stack}` printed no JSON: {_last_line(completed)}"
        ) from None
    return outputs


def _last_line(completed: subprocess.CompletedProcess[str]) -> str:
    """The last non-empty line Pulumi printed (its `error: ...`), else the exit code."""
    lines = [line.strip() for line in (completed.stderr or completed.stdout).splitlines()]
    lines = [line for line in lines if line]
    return lines[-1] if lines else f"exit code {completed.returncode}"


class PulumiNotLoggedIn(PulumiError):
    """Raised when `pulumi whoami` finds no logged-in backend."""


def backend_user() -> str:
    """The user `pulumi whoami` reports for the logged-in backend."""
    completed = subprocess.run(
        [pulumi_executable(), "whoami"], cwd=PROJECT_DIR, capture_output=True, text=True
    )
    if completed.returncode != 0:
        raise PulumiNotLoggedIn(_last_line(completed))
    return completed.stdout.strip()
