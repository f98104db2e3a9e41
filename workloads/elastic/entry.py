"""The function Ray Train runs on every worker: it loads the user's script from the shipped
files on that worker (never pickled from the driver) and calls its train_loop_per_worker."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from typing import Any

from vocab.errors import UserError
from workloads.elastic.loop import SETTINGS_KEY

ENTRY_POINT = "train_loop_per_worker"
MODULE_NAME = "spotburst_elastic_script"


class ScriptError(UserError, ValueError):
    """The script cannot be run: missing, unreadable, or without the entry point."""


def check_script(path: Path) -> None:
    """The script parses and defines train_loop_per_worker (read, not run)."""
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError) as error:
        raise ScriptError(f"--script: {path}: {error}") from None
    names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    if ENTRY_POINT not in names:
        raise ScriptError(f"--script: {path} defines no function {ENTRY_POINT}(config)")


def local_path(place: dict[str, str]) -> Path:
    """A shipped path on this worker: relative to the job's working dir where it has one
    (a Ray Job), else as the driver saw it (the same machine)."""
    relative = Path(place["relative"])
    return relative.resolve() if relative.exists() else Path(place["absolute"])


def train_entry(config: dict[str, Any]) -> Any:
    settings = config[SETTINGS_KEY]
    script = local_path(settings["script"])
    folder = local_path(settings["working_dir"]) if settings["working_dir"] else script.parent
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))  # the script's local imports
    spec = importlib.util.spec_from_file_location(MODULE_NAME, script)
    if spec is None or spec.loader is None:
        raise ScriptError(f"--script: cannot load {script}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module
    spec.loader.exec_module(module)
    return getattr(module, ENTRY_POINT)(config)
