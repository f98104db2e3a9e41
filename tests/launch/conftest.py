"""Launcher test fixtures: private lab state; one shared two-site lab (burst lab tests)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from netem.lab import LabDescription, two_site_lab
from netem.profile import load_profile
from tests.helpers.burst_results import LAB_BANDWIDTH
from tests.helpers.lab import private_state_dir


@pytest.fixture(autouse=True)
def private_lab_state(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    private_state_dir(monkeypatch, tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def shared_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabDescription]:
    """One lab for a module's tests (removed at the end, whatever happened)."""
    mp = pytest.MonkeyPatch()
    private_state_dir(mp, tmp_path_factory.getbasetemp())
    try:
        with two_site_lab(
            load_profile(bw=LAB_BANDWIDTH), progress=lambda message: None
        ) as lab:
            yield lab
    finally:
        mp.undo()
