"""The seams' pin on Ray: every private name they use is imported here and its call
signature checked against the parameters the seam passes, so a Ray upgrade that moves,
renames or changes one fails in this file, naming the seam entry to fix. How they behave
against a real cluster: tests/workloads/test_notice_agent.py (GCS client, drains),
tests/spotlab (the supervisor's GcsState), the elastic and RL acceptance runs."""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path
from typing import Any

import pytest

import launch.ray_private
import workloads.common.ray_private
from tests.test_layers import PRIVATE_RAY, imported_names
from workloads.common.ray_private import Private, load_private

SEAMS = {seam.__name__: seam for seam in (workloads.common.ray_private, launch.ray_private)}
ENTRIES = [(seam, name) for seam, module in SEAMS.items() for name in module.PRIVATE]


def _callable_parameters(target: Any) -> inspect.Signature | None:
    """Its signature; None for a compiled callable that carries none (only its presence
    can be checked)."""
    try:
        return inspect.signature(target)
    except (TypeError, ValueError):
        return None


@pytest.mark.parametrize(("seam", "name"), ENTRIES, ids=[f"{s}:{n}" for s, n in ENTRIES])
def test_every_private_name_is_where_the_seam_expects_it(seam: str, name: str) -> None:
    private: Private = SEAMS[seam].PRIVATE[name]
    where = f"{seam}.PRIVATE[{name!r}] ({private.module}.{private.name or '<module>'})"
    assert private.why.strip(), f"{where}: say which public API it stands in for, or why none"
    try:
        found = load_private(SEAMS[seam].PRIVATE, name)
    except (ImportError, AttributeError) as error:
        pytest.fail(f"{where}: gone in this Ray ({error}); fix the seam")
    for member, parameters in private.parameters.items():
        target = getattr(found, member, None) if member else found
        assert target is not None, f"{where}: has no {member!r} any more; fix the seam"
        signature = _callable_parameters(target)
        if signature is None:
            assert callable(target), f"{where}.{member}: not callable any more"
            continue
        accepts_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
        missing = [p for p in parameters if p not in signature.parameters and not accepts_any]
        assert not missing, (f"{where}.{member or '__call__'}{signature}: no parameter "
                             f"{missing}; fix the seam's call")


def _loaded_names(module: Any) -> set[str]:
    """The names the seam's code loads (`load("X")`, `load_private(PRIVATE, "X")`)."""
    found = set()
    for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("load", "load_private") and node.args
                and isinstance(node.args[-1], ast.Constant)):
            found.add(str(node.args[-1].value))
    return found


@pytest.mark.parametrize("seam", SEAMS)
def test_the_seam_reaches_ray_only_through_its_table(seam: str) -> None:
    """No private import beside the table (which the test above pins), and every name the
    seam's functions load is in it."""
    module = SEAMS[seam]
    path = Path(module.__file__ or "")
    assert not {name for name in imported_names(path) if PRIVATE_RAY.fullmatch(name)}
    assert _loaded_names(module) <= set(module.PRIVATE), _loaded_names(module) - set(
        module.PRIVATE)


def test_the_workloads_seam_imports_ray_train_on_first_use_only() -> None:
    """The notice agent imports the workloads' seam from Ray's image: its module level
    imports the standard library only, and Ray Train's internals come when first asked."""
    seam = workloads.common.ray_private
    tree = ast.parse(Path(seam.__file__ or "").read_text())
    top_level = {alias.name if isinstance(node, ast.Import) else node.module or ""
                 for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)
                 for alias in node.names}
    assert {name.split(".")[0] for name in top_level} <= {*sys.stdlib_module_names,
                                                          "__future__"}, top_level
    assert seam.ElasticScalingPolicy is load_private(seam.PRIVATE, "ElasticScalingPolicy")
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = seam.Nope
