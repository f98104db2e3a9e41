"""measure-link: both directions of a fresh lab are capped at the profile's rate.

How close to the rate a loaded machine gets is a benchmark (`invoke measure-link`), not a
unit test: here the cap must hold and traffic must flow.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from netem.lab.netns import existing_namespaces, netns_supported
from netem.measure import measure_link
from netem.profile import load_profile
from netem.throttle import throttled_copy

needs_netns = pytest.mark.skipif(not netns_supported()[0],
                                 reason=f"netns lab unavailable: {netns_supported()[1]}")


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPOTBURST_LAB_STATE_DIR", str(tmp_path / "labs"))


def assert_capped_at(link: dict, target: float) -> None:
    assert link["target_mbit"] == target
    for direction in ("onprem->cloud", "cloud->onprem"):
        assert 0.3 * target <= link["measured_mbit"][direction] <= 1.05 * target, link


@needs_netns
def test_measure_link_on_the_netns_lab(tmp_path: Path) -> None:
    namespaces_before = existing_namespaces()
    link = measure_link(load_profile(bw=50), tmp_path / "out", seconds=3)
    assert json.loads((tmp_path / "out" / "link.json").read_text()) == link
    assert link["lab"] == "netns" and link["delay_applied"] is False
    assert_capped_at(link, 55.0)
    assert existing_namespaces() == namespaces_before


def test_measure_link_on_the_process_lab_says_so(tmp_path: Path) -> None:
    link = measure_link(load_profile(bw=30), tmp_path, kind="process", seconds=3)
    assert link["lab"] == "process"
    assert link["shaping"] == "user-space token bucket"
    assert_capped_at(link, 31.0)


def test_the_user_space_throttle_holds_its_rate() -> None:
    payload = bytes(1_000_000)
    target = io.BytesIO()
    started = time.monotonic()
    copied = throttled_copy(io.BytesIO(payload), target, rate_mbit=40)
    seconds = time.monotonic() - started
    assert copied == len(payload) and target.getvalue() == payload
    # 8 Mbit at 40 Mbit/s: 0.2 s, less the initial 128 KiB burst; never faster than that
    assert seconds >= 0.15
