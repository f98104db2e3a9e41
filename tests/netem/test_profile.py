"""Profile resolution (name, bandwidth, file) and the errors for everything else."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from netem.profile import SEED_RATES, ProfileError, load_profile


@pytest.mark.parametrize("name, rate", sorted(SEED_RATES.items()))
def test_shipped_profiles_carry_the_seed_rates(name: str, rate: float) -> None:
    profile = load_profile(name)
    assert profile.target_mbit() == {"onprem->cloud": rate, "cloud->onprem": rate}
    condition = profile.cross_site("onprem")
    assert (condition.rtt_ms, condition.jitter_ms, condition.loss_percent) == (0.3, 0.01, 0)
    assert profile.links[("Cloud", "Cloud")].bandwidth_mbit == 5000
    assert profile.links[("HPCLogin", "HPCWorker")].bandwidth_mbit == 900


def test_shipped_files_are_node_link_json() -> None:
    shipped = Path(__file__).resolve().parents[2] / "netem" / "profiles" / "30m.json"
    document = json.loads(shipped.read_text())
    assert [node["id"] for node in document["nodes"]] == ["Cloud", "HPCLogin", "HPCWorker"]
    assert {"HPCWorker", "Cloud"} <= {document["links"][3]["source"],
                                      document["links"][3]["target"]}


@pytest.mark.parametrize("bw, name", [(100, "100m"), ("100", "100m"), (30.0, "30m")])
def test_a_seed_bandwidth_picks_the_seed_profile(bw: Any, name: str) -> None:
    assert load_profile(bw=bw).name == name


def test_another_bandwidth_makes_a_profile_with_that_rate() -> None:
    profile = load_profile(bw="75")
    assert profile.name == "bw-75m"
    assert profile.target_mbit() == {"onprem->cloud": 75.0, "cloud->onprem": 75.0}


def test_a_user_file_is_loaded(profile_file: Callable[..., Path]) -> None:
    profile = load_profile(str(profile_file(bandwidth=12.5)))
    assert profile.name == "mine"
    assert profile.cross_site("cloud").bandwidth_mbit == 12.5


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"profile": "fast"}, "unknown profile 'fast'"),
        ({"bw": "abc"}, "'abc' is not a number"),
        ({"bw": -5}, "must be a positive number"),
        ({"bw": 0}, "must be a positive number"),
        ({}, "exactly one"),
        ({"profile": "50m", "bw": 50}, "exactly one"),
        ({"profile": "/nonexistent/p.json"}, "cannot read profile file"),
    ],
)
def test_anything_else_lists_what_is_accepted(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ProfileError) as raised:
        load_profile(**kwargs)
    assert fragment in str(raised.value)
    assert "30m, 50m, 80m, 100m, 150m, 200m" in str(raised.value)


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], Any]:
    """A change to a valid document: set the item at `path` (an empty path replaces it)."""

    def change(doc: dict[str, Any]) -> Any:
        if not path:
            return value
        target: Any = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return doc

    return change


CONDITION = ("links", 2, "condition")


@pytest.mark.parametrize(
    "change, field",
    [
        (_set((), [1, 2]), "top level"),
        (_set(("nodes",), [{"id": "Cloud"}, {"id": "HPCLogin"}]), "nodes: missing HPCWorker"),
        (_set(("nodes",), [{"id": "Moon"}]), "nodes[0].id"),
        (_set(("links",), []), "links: must be a non-empty list"),
        (_set(("links", 1, "target"), "Laptop"), "links[1].target: 'Laptop'"),
        (_set(("links", 0), "Cloud->HPC"), "links[0]: must be an object"),
        (_set((*CONDITION, "bandwidth"), [0, 0]), "links[2].condition.bandwidth"),
        (_set((*CONDITION, "bandwidth"), "fast"), "links[2].condition.bandwidth"),
        (_set((*CONDITION, "rtt"), [-1, 0]), "links[2].condition.rtt"),
        (_set((*CONDITION, "loss"), [101, 0]), "links[2].condition.loss"),
        (_set((*CONDITION, "jitter"), [True, 0]), "links[2].condition.jitter"),
        (_set((*CONDITION, "bandwidth"), [99, 0]),
         "links[3].condition: HPCWorker->Cloud differs from links[2]"),
    ],
)
def test_a_bad_file_names_the_bad_field(
    seed_document: Callable[[], dict[str, Any]],
    document_file: Callable[[Any], Path],
    change: Callable[[dict[str, Any]], Any],
    field: str,
) -> None:
    with pytest.raises(ProfileError) as raised:
        load_profile(str(document_file(change(seed_document()))))
    assert field in str(raised.value)


def test_not_json_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text("{nope")
    with pytest.raises(ProfileError, match="not JSON"):
        load_profile(str(path))
