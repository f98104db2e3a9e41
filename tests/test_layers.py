"""The project's layers, checked on every import of every module (at the top, in a function
or for type checking only): each package imports only the layers below it, and no modules
import each other in a circle. Workloads run on clusters that have only what a job's working
dir ships, so what they import is also what launch.working_dir ships."""

from __future__ import annotations

import ast
from pathlib import Path

from launch.working_dir import CODE_PACKAGES

PROJECT_DIR = Path(__file__).resolve().parents[1]
MAY_IMPORT = {
    "vocab": set(),
    "procs": {"vocab"},
    "components": {"vocab"},
    "stacks": {"components", "vocab"},
    "workloads": {"vocab"},
    "netem": {"procs", "vocab", "workloads"},
    "spotlab": {"netem", "procs", "vocab", "workloads"},
    "launch": {"netem", "procs", "spotlab", "stacks", "components", "vocab", "workloads"},
}
"""Package -> the project's packages it may import besides itself."""
OURS = {*MAY_IMPORT, "tasks", "benchmarks", "tests"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_DIR).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The project modules `path` imports (`from a import b` counts `a.b` when that is a
    module of ours, else `a`)."""
    package = module_name(path).rsplit(".", 1)[0] if path.stem != "__init__" \
        else module_name(path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[:len(package.split(".")) - node.level + 1],
                                 *([base] if base else [])])
            names = [f"{base}.{alias.name}" if module_path(f"{base}.{alias.name}") else base
                     for alias in node.names]
        found.update(name for name in names if name.split(".")[0] in OURS)
    return found


def module_path(name: str) -> Path | None:
    base = PROJECT_DIR.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def graph() -> dict[str, set[str]]:
    return {module_name(path): imports(path)
            for package in MAY_IMPORT for path in (PROJECT_DIR / package).rglob("*.py")}


def test_each_package_imports_only_the_layers_below_it() -> None:
    upward = sorted(f"{module} imports {name}" for module, names in graph().items()
                    for name in names
                    if (top := name.split(".")[0]) != module.split(".")[0]
                    and top not in MAY_IMPORT[module.split(".")[0]])
    assert not upward, upward


def test_a_job_ships_every_layer_a_workload_imports() -> None:
    assert {"workloads", *MAY_IMPORT["workloads"]} <= set(CODE_PACKAGES)


def test_no_modules_import_each_other_in_a_circle() -> None:
    edges = {module: {name for name in names if name in modules}
             for modules in [set(graph())] for module, names in graph().items()}
    done: set[str] = set()

    def circle_from(module: str, path: list[str]) -> list[str]:
        if module in path:
            return [*path[path.index(module):], module]
        if module in done:
            return []
        for imported in sorted(edges.get(module, ())):
            if found := circle_from(imported, [*path, module]):
                return found
        done.add(module)
        return []

    circles = [found for module in sorted(edges) if (found := circle_from(module, []))]
    assert not circles, circles[0]
