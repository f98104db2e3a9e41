"""measure-link: both directions of a fresh lab are capped at the rate tc was given.

How close to the rate a loaded machine gets is a benchmark (`invoke measure-link`), not a
unit test: here the cap must hold, traffic must flow, and link.json must say what was shaped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from netem.lab.netns import existing_namespaces
from netem.measure import measure_link
from netem.profile import load_profile
from tests.helpers.lab import needs_netns

pytestmark = [pytest.mark.lab, needs_netns]


def test_measure_link_records_the_shaping_it_measured_against(tmp_path: Path) -> None:
    namespaces_before = existing_namespaces()
    link = measure_link(load_profile(bw=50), tmp_path / "out", seconds=3,
                        progress=lambda message: None)
    assert json.loads((tmp_path / "out" / "link.json").read_text()) == link
    assert link["lab"] == "netns"
    shaping: dict[str, Any] = link["shaping"]
    assert shaping["rate_mbit"] == {
        "onprem->cloud": 55.0, "cloud->onprem": 55.0, "onprem->s3": 55.0, "s3->onprem": 55.0}
    assert shaping["delay_applied"] is False and "tbf" in shaping["method"]
    for direction in shaping["rate_mbit"]:
        assert 0.3 * 55 <= link["measured_mbit"][direction] <= 1.05 * 55, link
        assert link["ratio"][direction] == round(link["measured_mbit"][direction] / 55, 3)
    assert existing_namespaces() == namespaces_before
