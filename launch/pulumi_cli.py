"""The Pulumi CLI, wrapped: the run tasks read stack outputs through it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

PROJECT_DIR = Path(__file__).resolve().parent.parent
INSTALL_HINT = (
    "the Pulumi CLI is not installed: install it with "
    "`curl -fsSL https://get.pulumi.com | sh` (or see https://www.pulumi.com/docs/install/)"
)


class PulumiCliMissing(RuntimeError):
    """Raised when a task needs the `pulumi` executable and it is not on PATH."""


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
    completed = subprocess.run(command, cwd=PROJECT_DIR, check=True, capture_output=True, text=True)
    outputs: dict[str, Any] = json.loads(completed.stdout)
    return outputs


class PulumiNotLoggedIn(RuntimeError):
    """Raised when `pulumi whoami` finds no logged-in backend."""


def backend_user() -> str:
    """The user `pulumi whoami` reports for the logged-in backend."""
    completed = subprocess.run(
        [pulumi_executable(), "whoami"], cwd=PROJECT_DIR, capture_output=True, text=True
    )
    if completed.returncode != 0:
        reason = (completed.stderr or completed.stdout).strip().splitlines()
        raise PulumiNotLoggedIn(reason[-1] if reason else f"exit code {completed.returncode}")
    return completed.stdout.strip()
