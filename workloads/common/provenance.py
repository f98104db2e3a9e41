"""Where a result came from: code version, interpreter and library versions, input files."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

GIT_COMMIT_ENV = "SPOTBURST_GIT_COMMIT"


def git_commit(folder: Path | None = None) -> str:
    """The launcher's commit (passed in the job's environment), else the commit of the
    checkout holding `folder` (this code's by default), with "+dirty" when its files differ
    from it (untracked ones too, ignored ones not); else 'unknown' (a code folder uploaded
    without .git)."""
    passed = os.environ.get(GIT_COMMIT_ENV)
    if passed:
        return passed
    where = folder or Path(__file__).resolve().parent
    try:
        commit = _git(where, "rev-parse", "HEAD")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    try:  # untracked files count: a new module is code the commit does not hold
        changed = _git(where, "status", "--porcelain")
    except (OSError, subprocess.CalledProcessError):
        return f"{commit}+unknown-changes"
    return f"{commit}+dirty" if changed else commit


def _git(folder: Path, *args: str) -> str:
    completed = subprocess.run(
        ["git", "--no-optional-locks", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    )
    return completed.stdout.strip()


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def provenance(
    parameters: dict[str, Any], inputs: dict[str, Path], target: str, seeds: dict[str, int]
) -> dict[str, Any]:
    """The provenance.json document (inputs: role -> file, recorded with its sha256)."""
    return {
        "parameters": parameters,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "ray": package_version("ray"),
        "numpy": package_version("numpy"),
        "inputs": {
            role: {"file": path.name, "sha256": sha256_of(path)} for role, path in inputs.items()
        },
        "target": target,
        "seeds": seeds,
    }
