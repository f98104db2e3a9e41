"""The user's training script: checked where the run is launched (read, not run), loaded on
every worker from the files shipped with the code (never pickled from the driver)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vocab.errors import UserError

MODULE_NAME = "spotburst_elastic_script"


class ScriptError(UserError, ValueError):
    """The script cannot be run: missing, unreadable, or without the training function."""


def top_level_names(tree: ast.Module) -> set[str]:
    """Every name the module binds at its top level: functions, assignments (an alias such
    as `train_loop_per_worker = train_func`), imports."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def check_script(path: Path, function: str) -> None:
    """The script parses and binds `function` at its top level (read, not run)."""
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError) as error:
        raise ScriptError(f"--script: {path}: {' '.join(str(error).split())}") from None
    if function not in top_level_names(tree):
        raise ScriptError(f"--function: {path} defines no {function}: name the script's "
                          f"training function with --function")


def local_path(place: dict[str, str]) -> Path:
    """A shipped path on this worker: relative to the job's working dir where it has one
    (a Ray Job), else as the driver saw it (the same machine)."""
    relative = Path(place["relative"])
    return relative.resolve() if relative.exists() else Path(place["absolute"])


def place(path: Path) -> dict[str, str]:
    """A shipped path as each worker looks it up (see local_path)."""
    return {"relative": str(path), "absolute": str(path.resolve())}


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
