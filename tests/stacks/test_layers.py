"""stacks/ imports neither launch/ nor, anywhere in a module (at the top, in a function or
for type checking only), one of its own modules that imports it back."""

from __future__ import annotations

import ast
from pathlib import Path

STACKS = Path(__file__).resolve().parents[2] / "stacks"


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            if node.module == "stacks":  # `from stacks import outputs`
                found.update(f"stacks.{alias.name}" for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    return {
        f"stacks.{path.stem}": _imports(path)
        for path in STACKS.glob("*.py")
        if path.stem != "__init__"
    }


def test_stacks_never_import_launch() -> None:
    assert {
        module: sorted(name for name in names if name.split(".")[0] in ("launch", "tasks"))
        for module, names in _graph().items()
    } == {module: [] for module in _graph()}


def _circle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle in `graph` (module -> the modules it imports), or []."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str]:
        if module in path:
            return [*path[path.index(module):], module]
        if module in done:
            return []
        for imported in sorted(graph.get(module, ())):
            if circle := visit(imported, [*path, module]):
                return circle
        done.add(module)
        return []

    for module in sorted(graph):
        if circle := visit(module, []):
            return circle
    return []


def test_no_import_circle_among_the_stacks_modules() -> None:
    graph = {module: {n for n in names if n.startswith("stacks.")}
             for module, names in _graph().items()}
    assert _circle(graph) == []


def test_the_check_finds_a_circle_through_a_function_and_type_checking_imports(
    tmp_path: Path,
) -> None:
    """The shape of the circle stacks/ once had: config imported the cost ceiling inside a
    function, which imported config for type checking only."""
    (tmp_path / "a.py").write_text("def f():\n    from stacks.b import g\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\n"
                                   "if TYPE_CHECKING:\n    from stacks.a import f\n")
    graph = {"stacks.a": _imports(tmp_path / "a.py"), "stacks.b": _imports(tmp_path / "b.py")}
    assert _circle(graph) == ["stacks.a", "stacks.b", "stacks.a"]
    assert _circle({"stacks.a": {"stacks.b"}, "stacks.b": set()}) == []
