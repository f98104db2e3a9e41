"""The project's layers, checked on every import of every module (at the top, in a function
or for type checking only): each package imports only the layers below it, and no modules
import each other in a circle. Workloads run on clusters that have only what a job's working
dir ships, so what they import is also what launch.working_dir ships.

The third-party rules the architecture states: Ray's private modules are imported (or named)
only in the seams (SEAMS), components and the other Pulumi layers never import Ray, and
workloads never import Pulumi or Invoke. Each rule is a function of a project tree, and each
is shown to fail on a tree with one planted violation."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

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
CHECKED = {*MAY_IMPORT, "tasks", "benchmarks"}
"""What the third-party rules cover (the tests pin Ray's private behaviour on purpose)."""
SEAMS = {"workloads.common.ray_private", "launch.ray_private"}
"""The only modules that import Ray's private APIs (spotlab uses the workloads' seam)."""
PULUMI_OR_INVOKE = re.compile(r"pulumi(_\w+)?|invoke")
NEVER_IMPORTS = {
    "components": re.compile(r"ray"),
    "stacks": re.compile(r"ray"),
    "vocab": re.compile(rf"ray|{PULUMI_OR_INVOKE.pattern}"),
    "workloads": PULUMI_OR_INVOKE,
}
"""Package -> the third-party top-level modules it never imports."""
PRIVATE_RAY = re.compile(r"ray(\.\w+)*\.(_\w+|core\.generated)(\.\w+)*")
"""A Ray module no public API promises: a part with a leading underscore, or the generated
protobuf code."""


def module_name(path: Path, root: Path = PROJECT_DIR) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, root: Path = PROJECT_DIR) -> set[str]:
    """Every module `path` imports, ours or not, anywhere in it (`from a import b` counts
    `a.b` when that is a module of ours, else `a`)."""
    module = module_name(path, root)
    package = module.rsplit(".", 1)[0] if path.stem != "__init__" else module
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[:len(package.split(".")) - node.level + 1],
                                 *([base] if base else [])])
            found.update(f"{base}.{alias.name}" if module_path(f"{base}.{alias.name}", root)
                         else base for alias in node.names)
    return found


def imports(path: Path, root: Path = PROJECT_DIR) -> set[str]:
    """The project modules `path` imports."""
    return {name for name in imported_names(path, root) if name.split(".")[0] in OURS}


def module_path(name: str, root: Path = PROJECT_DIR) -> Path | None:
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def sources(root: Path, packages: set[str]) -> list[Path]:
    return sorted(path for package in packages
                  for path in ([root / f"{package}.py"] if (root / f"{package}.py").exists()
                               else (root / package).rglob("*.py")))


def graph(root: Path = PROJECT_DIR) -> dict[str, set[str]]:
    return {module_name(path, root): imports(path, root)
            for path in sources(root, set(MAY_IMPORT))}


def upward_imports(root: Path = PROJECT_DIR) -> list[str]:
    return sorted(f"{module} imports {name}" for module, names in graph(root).items()
                  for name in names
                  if (top := name.split(".")[0]) != module.split(".")[0]
                  and top not in MAY_IMPORT[module.split(".")[0]])


def private_ray_outside_the_seams(root: Path = PROJECT_DIR) -> list[str]:
    """Imports of Ray's private modules, and strings naming one (a logger's name, an
    importlib path), outside SEAMS."""
    found = []
    for path in sources(root, CHECKED):
        module = module_name(path, root)
        if module in SEAMS:
            continue
        names = {name for name in imported_names(path, root) if PRIVATE_RAY.fullmatch(name)}
        names |= {node.value for node in ast.walk(ast.parse(path.read_text()))
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and PRIVATE_RAY.fullmatch(node.value)}
        found += [f"{module} uses {name}: through {' or '.join(sorted(SEAMS))} only"
                  for name in sorted(names)]
    return found


def third_party_breaches(root: Path = PROJECT_DIR) -> list[str]:
    return [f"{module_name(path, root)} imports {name}"
            for package, never in sorted(NEVER_IMPORTS.items())
            for path in sources(root, {package})
            for name in sorted(imported_names(path, root))
            if never.fullmatch(name.split(".")[0])]


def test_each_package_imports_only_the_layers_below_it() -> None:
    assert not (upward := upward_imports()), upward


def test_rays_private_apis_are_used_through_the_seams_only() -> None:
    assert not (found := private_ray_outside_the_seams()), found
    assert all(module_path(seam) for seam in SEAMS)


def test_no_layer_imports_the_third_parties_it_must_not() -> None:
    assert not (found := third_party_breaches()), found


PLANTED = {
    "upward": ("workloads/doll/run.py", "from spotlab import spot_lab\n", upward_imports,
               "workloads.doll.run imports spotlab"),
    "private import": ("spotlab/supervisor.py", "def f():\n    from ray._raylet import X\n",
                       private_ray_outside_the_seams, "spotlab.supervisor uses ray._raylet"),
    "private train import": ("workloads/elastic/controller.py",
                             "from ray.train.v2._internal.util import time_monotonic\n",
                             private_ray_outside_the_seams,
                             "workloads.elastic.controller uses ray.train.v2._internal.util"),
    "private name": ("workloads/rl/runners.py",
                     "import logging\nlogging.getLogger('ray._common.deprecation')\n",
                     private_ray_outside_the_seams,
                     "workloads.rl.runners uses ray._common.deprecation"),
    "generated protobuf": ("launch/preempt.py",
                           "from ray.core.generated import autoscaler_pb2\n",
                           private_ray_outside_the_seams,
                           "launch.preempt uses ray.core.generated"),
    "ray in a component": ("components/ray_cluster.py", "import ray\n", third_party_breaches,
                           "components.ray_cluster imports ray"),
    "pulumi in a workload": ("workloads/common/results.py", "import pulumi_aws as aws\n",
                             third_party_breaches, "workloads.common.results imports pulumi_aws"),
    "invoke in a workload": ("workloads/burst/run.py", "from invoke import task\n",
                             third_party_breaches, "workloads.burst.run imports invoke"),
}


@pytest.mark.parametrize(("where", "code", "rule", "message"), PLANTED.values(),
                         ids=PLANTED.keys())
def test_each_rule_fails_on_a_planted_violation(
    tmp_path: Path, where: str, code: str, rule: object, message: str
) -> None:
    """A tree with the package layout and one planted module: its rule names it, and a
    seam may do what the others may not."""
    for package in MAY_IMPORT:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "spotlab" / "__init__.py").write_text("def spot_lab() -> None: ...\n")
    planted = tmp_path / where
    for parent in planted.relative_to(tmp_path).parents:
        if parent != Path("."):
            (tmp_path / parent).mkdir(exist_ok=True)
            (tmp_path / parent / "__init__.py").touch()
    assert callable(rule)
    assert rule(tmp_path) == []
    planted.write_text(code)
    assert any(found.startswith(message) for found in rule(tmp_path)), rule(tmp_path)
    for seam in SEAMS:
        seam_path = tmp_path.joinpath(*seam.split(".")).with_suffix(".py")
        seam_path.parent.mkdir(parents=True, exist_ok=True)
        seam_path.write_text("from ray._raylet import GcsClient\n")
    assert not any(found.startswith(f"{seam} ") for found in private_ray_outside_the_seams(
        tmp_path) for seam in SEAMS)


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
