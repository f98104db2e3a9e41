"""Every test that starts a process carries a marker saying so (pyproject's markers), so
`invoke test --quick` can leave those out: an unmarked test that starts one fails here."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
PROJECT_MARKERS = [
    line.split(":")[0]
    for line in tomllib.loads(PYPROJECT.read_text())["tool"]["pytest"]["ini_options"]["markers"]
]


@pytest.fixture(autouse=True)
def starting_a_process_needs_a_marker(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    if any(request.node.get_closest_marker(name) for name in PROJECT_MARKERS):
        return

    def refuse(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        pytest.fail(
            f"{request.node.nodeid} starts a process ({str(args)[:120]}) but has none of the "
            f"markers {', '.join(PROJECT_MARKERS)}: mark it, so `invoke test --quick` skips it"
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`--dist loadgroup`, as `invoke test` runs): a test module stays on
    one worker, so its module fixtures (a lab, a Ray cluster) are built once; every test that
    builds network namespaces runs on one worker, one lab at a time (the netns lab commands
    act on "the" running lab, and the lab tests compare the namespaces before and after)."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        group = "netns" if item.get_closest_marker("lab") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
