"""A stack's raw config, read from `Pulumi.<stack>.yaml` as the Pulumi engine would hand it to
the program. Plain YAML: no Pulumi import, nothing patched (`invoke up` reads it)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from vocab.errors import UserError

PROJECT_DIR = Path(__file__).resolve().parent.parent


class StackConfigMissing(UserError, FileNotFoundError):
    """The stack has no config file."""


def stack_config_file(stack: str) -> Path:
    return PROJECT_DIR / f"Pulumi.{stack}.yaml"


def read_stack_config(stack: str) -> dict[str, str]:
    """`Pulumi.<stack>.yaml` as the raw config the Pulumi engine hands the program."""
    path = stack_config_file(stack)
    if not path.exists():
        raise StackConfigMissing(f"no config for stack {stack!r}: {path} does not exist")
    document = yaml.safe_load(path.read_text()) or {}
    values = document.get("config") or {}
    return {
        key: value if isinstance(value, str) else json.dumps(value) for key, value in values.items()
    }
