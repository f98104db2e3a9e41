"""Fixtures for the network-emulation tests: private lab state, seed-format profile files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.lab import private_state_dir
from tests.helpers.profiles import document, write_document, write_profile


@pytest.fixture(autouse=True)
def private_lab_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    private_state_dir(monkeypatch, tmp_path)


@pytest.fixture
def profile_file(tmp_path: Path) -> Callable[..., Path]:
    """Write a seed-format profile (cross-site bandwidth and values given) and return its path."""

    def write(bandwidth: float = 40, name: str = "mine", **values: float) -> Path:
        return write_profile(tmp_path, bandwidth, name, **values)

    return write


@pytest.fixture
def seed_document() -> Callable[[], dict[str, Any]]:
    """A fresh valid seed-format document (40 Mbit/s across the sites) on every call."""
    return lambda: document(40)


@pytest.fixture
def document_file(tmp_path: Path) -> Callable[[Any], Path]:
    """Write any JSON document as a profile file and return its path."""

    def write(doc: Any) -> Path:
        return write_document(tmp_path, doc)

    return write
