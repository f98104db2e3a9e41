"""Every test that starts a process carries a marker saying so (pyproject's markers), so
`invoke test --quick` can leave those out: an unmarked test that starts one fails here."""

from __future__ import annotations

import fcntl
import subprocess
import tempfile
import tomllib
from collections.abc import Iterator
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


NETNS_LOCK = Path(tempfile.gettempdir()) / "spotburst-netns-tests.lock"


@pytest.fixture(scope="module", autouse=True)
def one_netns_module_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module with tests that build network namespaces holds a machine-wide lock from before
    its fixtures (a shared lab) until after them: with `invoke test`'s two xdist workers (one
    module per worker) and other pytest runs, one such module runs at a time, as the lab tests
    compare the namespaces before and after."""
    module = request.module
    if not any(item.get_closest_marker("lab") and getattr(item, "module", None) is module
               for item in request.session.items):
        yield
        return
    with NETNS_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


LONGEST_FIRST = ("tests/acceptance/test_rl.py", "tests/workloads/test_elastic_scripts.py",
                 "tests/acceptance/test_rl_own_env.py",
                 "tests/acceptance/test_inference.py", "tests/acceptance/test_burst.py",
                 "tests/acceptance/test_doll.py", "tests/acceptance/test_elastic.py",
                 "tests/launch/test_bare_head.py", "tests/workloads/test_rl_lab.py")
"""Files that take minutes, longest first (CI's --durations): collected first, and `invoke
test` keeps the collection order (xdist's --no-loadscope-reorder; by default it hands out the
files with the most tests first), so the two workers start on these and fill in with short
files, instead of one worker running a long file alone at the end."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::")[0]
        return next((i for i, prefix in enumerate(LONGEST_FIRST) if path.startswith(prefix)),
                    len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: each file's tests keep their order
