"""Profile resolution (name, bandwidth, file) and the errors for everything else."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from netem.profile import (
    SEED_RATES,
    Condition,
    Profile,
    ProfileError,
    load_profile,
    synthesized_profile,
)
from tests.helpers.asymmetric import asymmetric_document


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
        ({"bw": -5}, "must be 0.1-10000 Mbit/s"),
        ({"bw": 0}, "must be 0.1-10000 Mbit/s"),
        ({"bw": 1e-9}, "must be 0.1-10000 Mbit/s"),
        ({"bw": 1e15}, "must be 0.1-10000 Mbit/s"),
        ({}, "exactly one"),
        ({"profile": "50m", "bw": 50}, "exactly one"),
        ({"profile": "/nonexistent/p.json"}, "--profile: /nonexistent/p.json: no such file"),
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


@pytest.mark.parametrize("name, rate", sorted(SEED_RATES.items()))
def test_a_synthesized_profile_is_shaped_exactly_like_the_seed_files(
    name: str, rate: float
) -> None:
    """The shipped seed files are the independent reference for every link and value."""
    assert synthesized_profile(rate).links == load_profile(name).links


def test_each_direction_keeps_its_own_condition(
    seed_document: Callable[[], dict[str, Any]], document_file: Callable[[Any], Path]
) -> None:
    path = document_file(asymmetric_document(seed_document()))
    profile = load_profile(str(path))
    assert profile.source == str(path) and profile.name == "bad"
    assert profile.cross_site("onprem") == Condition(10.0, 3.0, 20.0, 4.0, 2.0, 0.25, 1.5, 0.2)
    assert profile.cross_site("cloud") == Condition(40.0, 1.0, 80.0, 2.0, 4.0, 0.5, 0.5, 0.1)
    assert profile.target_mbit() == {"onprem->cloud": 20.0, "cloud->onprem": 80.0}
    # the HPC worker -> login link is intra-site: never the cross-site condition
    assert profile.links[("HPCLogin", "HPCWorker")].bandwidth_mbit == 900


def test_where_each_profile_comes_from_is_recorded(profile_file: Callable[..., Path]) -> None:
    assert load_profile("50m").source == "builtin:50m"
    assert load_profile(bw=75).source == "bandwidth:75"
    assert load_profile(bw=0.5).target_mbit() == {"onprem->cloud": 0.5, "cloud->onprem": 0.5}
    path = profile_file(bandwidth=0.25, loss=100)
    assert load_profile(str(path)).cross_site("onprem").loss_percent == 100.0
    assert load_profile(str(path)).cross_site("onprem").bandwidth_mbit == 0.25


def test_a_missing_direction_is_named(
    seed_document: Callable[[], dict[str, Any]], document_file: Callable[[Any], Path]
) -> None:
    document = seed_document()
    document["links"] = [link for link in document["links"] if link["source"] != "Cloud"]
    path = document_file(document)
    with pytest.raises(ProfileError) as raised:
        load_profile(str(path))
    assert str(raised.value) == f"{path}: links: no link from a cloud node to a onprem node"
    profile = Profile("p", "here", {("HPCLogin", "Cloud"): synthesized_profile(5).links[
        ("HPCLogin", "Cloud")]})
    with pytest.raises(ProfileError) as raised:
        profile.cross_site("cloud")
    assert str(raised.value) == "here: no link from site cloud to site onprem"


EXACT_ERRORS = [
    (_set(("nodes",), [{"id": "Cloud"}]),
     "nodes: missing HPCLogin, HPCWorker (a profile names Cloud, HPCLogin, HPCWorker)"),
    (_set(("nodes",), "Cloud"), 'nodes: must be a list of {"id": name}'),
    (_set(("nodes",), [{"id": "Moon"}]), "nodes[0].id: must be one of Cloud, HPCLogin, HPCWorker"),
    (_set(("links",), {}), "links: must be a non-empty list of {source, target, condition}"),
    (_set(("links", 1, "source"), "Laptop"),
     "links[1].source: 'Laptop' is not one of Cloud, HPCLogin, HPCWorker"),
    (_set(("links", 0), 7), "links[0]: must be an object"),
    (_set(CONDITION, [1]),
     "links[2].condition: must be an object with rtt, bandwidth, jitter, loss"),
    (_set((*CONDITION, "rtt"), [1, 2, 3]),
     "links[2].condition.rtt: must be [mean, std] of two non-negative numbers, got [1, 2, 3]"),
    (_set((*CONDITION, "bandwidth"), [0, 0]),
     "links[2].condition.bandwidth: the mean must be 0.1-10000 Mbit/s, got 0"),
    (_set((*CONDITION, "bandwidth"), [1e15, 0]),
     "links[2].condition.bandwidth: the mean must be 0.1-10000 Mbit/s, got 1e+15"),
    (_set((*CONDITION, "bandwidth"), [1e-9, 0]),
     "links[2].condition.bandwidth: the mean must be 0.1-10000 Mbit/s, got 1e-09"),
    (_set((*CONDITION, "rtt"), [1e12, 0]),
     "links[2].condition: rtt and jitter must be at most 10000 ms"),
    (_set((*CONDITION, "loss"), [100.5, 0]),
     "links[2].condition.loss: the mean is a percentage, at most 100"),
    (_set((*CONDITION, "bandwidth"), [99, 0]),
     "links[3].condition: HPCWorker->Cloud differs from links[2] HPCLogin->Cloud; shaping is "
     "per site pair, so every onprem->cloud link must have the same condition"),
    (_set((), "text"), "the top level must be a JSON object with nodes and links"),
]


@pytest.mark.parametrize("change, message", EXACT_ERRORS)
def test_the_whole_error_message(
    seed_document: Callable[[], dict[str, Any]],
    document_file: Callable[[Any], Path],
    change: Callable[[dict[str, Any]], Any],
    message: str,
) -> None:
    path = document_file(change(seed_document()))
    with pytest.raises(ProfileError) as raised:
        load_profile(str(path))
    assert str(raised.value) == f"{path}: {message}"


def test_the_accepted_forms_are_spelt_out() -> None:
    with pytest.raises(ProfileError) as raised:
        load_profile("fast")
    assert str(raised.value) == (
        "unknown profile 'fast'; accepted: a profile name (30m, 50m, 80m, 100m, 150m, 200m), a "
        "bandwidth in Mbit/s (--bw N: 30/50/80/100/150/200 pick the shipped profile, any "
        "other positive number makes one with that rate), or a path to a profile JSON file "
        "(node-link format: docs/labs.md)"
    )


def test_intra_site_links_listed_first_are_not_taken_for_the_cross_site_one() -> None:
    def bandwidth(mbit: float) -> Condition:
        return Condition(0.3, 0.0, mbit, 0.0, 0.01, 0.0, 0.0, 0.0)

    profile = Profile("p", "here", {
        ("HPCLogin", "HPCWorker"): bandwidth(900), ("Cloud", "Cloud"): bandwidth(5000),
        ("HPCLogin", "Cloud"): bandwidth(20), ("Cloud", "HPCLogin"): bandwidth(80)})
    assert profile.target_mbit() == {"onprem->cloud": 20.0, "cloud->onprem": 80.0}


def test_the_profile_file_docs_labs_md_shows_loads_as_shown(tmp_path: Path) -> None:
    """The example of docs/labs.md's "The profile file" is a profile `--profile FILE` takes."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "labs.md").read_text()
    section = text[text.index("**The profile file.**"):]
    example = section[section.index("```json\n") + len("```json\n"):section.index("\n```\n")]
    path = tmp_path / "mine.json"
    path.write_text(example)
    profile = load_profile(str(path))
    assert profile.target_mbit() == {"onprem->cloud": 40.0, "cloud->onprem": 40.0}
    assert profile.cross_site("onprem").rtt_ms == 0.3
