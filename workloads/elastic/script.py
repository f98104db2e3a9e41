"""The user's training script: checked where the run is launched (read, not run), loaded on
every worker from the files shipped with the code (never pickled from the driver)."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vocab.errors import UserError
from workloads.common.user_code import (
    imported_names,
    local_path,
    parsed,
    place,
    top_level_names,
)

__all__ = ["ScriptError", "ShippedScript", "check_script", "load_function", "local_path",
           "place", "run_training_function"]

MODULE_NAME = "spotburst_elastic_script"


class ScriptError(UserError, ValueError):
    """The script cannot be run: missing, unreadable, or without the training function."""


def check_script(path: Path, function: str, torchft: bool = False) -> None:
    """The script parses, binds `function` at its top level and imports torchft exactly when
    it is to run as torchft replica groups (read, not run)."""
    try:
        tree = parsed(path, "--script")
    except UserError as error:
        raise ScriptError(str(error)) from None
    if function not in top_level_names(tree):
        raise ScriptError(f"--function: {path} defines no {function}: name the script's "
                          f"training function with --function")
    written_for_torchft = imports_torchft(tree)
    if torchft and not written_for_torchft:
        raise ScriptError(f"--torchft: {path} does not import torchft: survivor mode runs a "
                          "script written for torchft (its Manager commits each step); "
                          "without --torchft, Ray Train runs it in restart mode")
    if written_for_torchft and not torchft:
        raise ScriptError(f"--torchft: {path} imports torchft: run it with --torchft, as "
                          "torchft replica groups (without it torchft's Manager finds no "
                          "lighthouse)")


def imports_torchft(tree: ast.Module) -> bool:
    """Whether the module imports torchft anywhere (at its top or inside a function)."""
    return any(name.split(".")[0] == "torchft" for name in imported_names(tree))


def load_function(script: Path, working_dir: Path | None, function: str,
                  argv: list[str]) -> Callable[..., Any]:
    """Import the script (its folder, or the working dir, on sys.path for its own imports;
    `argv` as its sys.argv[1:]) and return its training function."""
    folder = working_dir or script.parent
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    sys.argv = [str(script), *argv]  # this process is a dedicated Ray Train worker
    spec = importlib.util.spec_from_file_location(MODULE_NAME, script)
    if spec is None or spec.loader is None:
        raise ScriptError(f"--script: cannot load {script}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module
    spec.loader.exec_module(module)
    found = getattr(module, function, None)
    if not callable(found):
        raise ScriptError(f"--function: {function} in {script} is not callable")
    return found  # type: ignore[no-any-return]


def run_training_function(script: Path, working_dir: Path | None, function: str,
                          argv: list[str], config: dict[str, Any]) -> Any:
    """Load the script's training function and call it as Ray Train does: with the config
    when it takes an argument, else without."""
    found = load_function(script, working_dir, function, argv)
    takes_config = any(
        p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        for p in inspect.signature(found).parameters.values())
    return found(config) if takes_config else found()


@dataclass(frozen=True, kw_only=True)
class ShippedScript:
    """What the driver tells every worker of both modes (a Ray Train worker, a replica group):
    the run's ledger, the script and its folder among the files shipped with the job, its
    training function and argv, how often the node's notice is polled."""

    ledger: str
    script: dict[str, str]
    working_dir: dict[str, str] | None
    function: str
    argv: list[str]
    notice_poll: float

    def run(self, config: dict[str, Any]) -> Any:
        """The script's training function, called here as Ray Train calls it."""
        folder = local_path(self.working_dir) if self.working_dir else None
        return run_training_function(local_path(self.script), folder, self.function,
                                     self.argv, config)
