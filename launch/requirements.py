"""A workload's Python requirements for a Ray Job's `runtime_env`: the third-party
distributions its code imports (followed through the project's own modules), each pinned to
the version installed here. Derived every time, never typed: a new import is a new pin."""

from __future__ import annotations

import ast
import sys
from importlib.metadata import packages_distributions, version
from pathlib import Path

# Already on every Ray node at the cluster's pinned version: never reinstalled by a job.
ON_THE_CLUSTER = frozenset({"ray"})


def _source(root: Path, module: str) -> tuple[Path, bool] | None:
    """The file of a project module and whether it is a package (None: a name, not a file)."""
    base = root.joinpath(*module.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py", True
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py"), False
    return None


def imported_modules(root: Path, module: str, project_packages: tuple[str, ...]) -> set[str]:
    """Top-level names of everything `module` (under `root`) imports, following imports of
    the project's own packages transitively (a package brings all of its modules); read from
    the sources, nothing is imported."""
    seen: set[str] = set()
    found: set[str] = set()
    pending = [module]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        located = _source(root, name)
        if located is None:  # `from package.module import name`: a name, not a module
            continue
        source, is_package = located
        if is_package:
            pending += [f"{name}.{path.stem}" for path in source.parent.glob("*.py")]
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module]
                targets += [f"{node.module}.{alias.name}" for alias in node.names]
            for target in targets:
                top = target.split(".")[0]
                if top in project_packages:
                    pending.append(target)
                else:
                    found.add(top)
    return found


def pinned_requirements(root: Path, module: str, project_packages: tuple[str, ...]) -> list[str]:
    """`["numpy==X", ...]`: the distributions providing `module`'s third-party imports, at
    their installed versions, sorted; the standard library and Ray itself left out."""
    providers = packages_distributions()
    # the project itself travels as the job's working_dir, never as a requirement
    own = {name for package in project_packages for name in providers.get(package, [])}
    pins: set[str] = set()
    for top in imported_modules(root, module, project_packages):
        if top in sys.stdlib_module_names or top == "__future__":
            continue
        for distribution in providers.get(top, []):
            if distribution.lower() not in ON_THE_CLUSTER and distribution not in own:
                pins.add(f"{distribution}=={version(distribution)}")
    return sorted(pins, key=str.lower)
