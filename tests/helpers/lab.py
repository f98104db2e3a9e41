"""Checks for tests that bring up the two-site lab (root and `ip netns` needed)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from netem.lab.netns import existing_namespaces, netns_supported
from netem.lab.processes import marked_pids
from netem.lab.state import STATE_DIR_ENV, state_dir

needs_netns = pytest.mark.skipif(
    not netns_supported()[0], reason=f"the lab needs namespaces: {netns_supported()[1]}"
)


def private_state_dir(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Lab state files of a test stay out of the user's /run/spotburst/labs."""
    monkeypatch.setenv(STATE_DIR_ENV, str(folder / "labs"))


def assert_nothing_left(lab_id: str) -> None:
    """No namespace, process, temp dir or state file of the lab remains."""
    assert not [ns for ns in existing_namespaces() if ns.startswith(f"sb-{lab_id}-")]
    assert marked_pids(lab_id) == set()
    assert not (Path(tempfile.gettempdir()) / f"sb-{lab_id}").exists()
    assert not (state_dir() / f"{lab_id}.json").exists()
