"""A researcher's own Python file (a training script, a task file, an environment): checked
where the run is launched, found again on every node from the files shipped with the code,
and imported there from its path (never pickled from the driver)."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from vocab.errors import UserError


class UserCodeError(UserError, ValueError):
    """A user's file cannot be used: missing, unreadable, failing to import, or without the
    name it is to provide."""


def top_level_names(tree: ast.Module) -> set[str]:
    """Every name the module binds at its top level: functions, classes, assignments (an
    alias such as `train_loop_per_worker = train_func`), imports."""
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


def imported_names(tree: ast.AST) -> list[str]:
    """What the code imports, anywhere in it (absolute imports only): `import a.b` gives
    `a.b`; `from a.b import c` gives `a.b` and `a.b.c` (c may be a module or a name)."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return names


def parsed(path: Path, flag: str) -> ast.Module:
    """The file's syntax tree, or one line naming `flag` and what is wrong."""
    try:
        return ast.parse(path.read_text(), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError) as error:
        raise UserCodeError(f"{flag}: {path}: {' '.join(str(error).split())}") from None


def local_path(place: dict[str, str]) -> Path:
    """A shipped path on this node: relative to the job's working dir where it has one
    (a Ray Job), else as the driver saw it (the same machine)."""
    relative = Path(place["relative"])
    return relative.resolve() if relative.exists() else Path(place["absolute"])


def place(path: Path) -> dict[str, str]:
    """A shipped path as each node looks it up (see local_path)."""
    return {"relative": str(path), "absolute": str(path.resolve())}


_LOADED: dict[Path, ModuleType] = {}


def import_file(path: Path, flag: str) -> ModuleType:
    """Import the file as a module of its own (its folder on sys.path for its own imports),
    once per process. Whatever the import raises is one line naming `flag`, the file and
    the error (a missing package named by the ImportError)."""
    path = path.resolve()
    if path in _LOADED:
        return _LOADED[path]
    if not path.is_file():
        raise UserCodeError(f"{flag}: {path}: no such file")
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    name = f"spotburst_user_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserCodeError(f"{flag}: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as error:
        del sys.modules[name]
        raise UserCodeError(f"{flag}: {path} imports {error.name!r}, which is not installed "
                            f"here (install it, and list it in --requirements for a remote "
                            f"cluster)") from None
    except BaseException as error:  # noqa: BLE001 - the user's code may raise anything
        del sys.modules[name]
        if isinstance(error, KeyboardInterrupt):
            raise
        last = traceback.extract_tb(error.__traceback__)[-1]
        raise UserCodeError(f"{flag}: {path} fails to import: {type(error).__name__}: "
                            f"{' '.join(str(error).split())} (line {last.lineno})") from None
    _LOADED[path] = module
    return module


def function_of(path: Path, name: str, file_flag: str, name_flag: str) -> Any:
    """The callable `name` of the file, imported (see import_file)."""
    module = _LOADED.get(path.resolve())
    if module is not None and callable(getattr(module, name, None)):
        return getattr(module, name)
    if name not in top_level_names(parsed(path, file_flag)):
        raise UserCodeError(f"{name_flag}: {path} defines no {name!r}: name the function "
                            f"with {name_flag}")
    found = getattr(import_file(path, file_flag), name, None)
    if not callable(found):
        raise UserCodeError(f"{name_flag}: {name!r} in {path} is not callable")
    return found
