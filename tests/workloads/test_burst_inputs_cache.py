"""The inputs cache: a run copies inputs of the same parameters instead of generating them,
and inputs of other parameters never come from another set's folder."""

from __future__ import annotations

from pathlib import Path

from workloads.burst.inputs import MANIFEST, ensure_inputs
from workloads.burst.options import BurstOptions
from workloads.common.storage import LocalStorage


def small(seed: int = 0) -> BurstOptions:
    return BurstOptions(
        workload="param-server", directories=2, images_per_directory=2, ps_image_side=64, seed=seed
    )


def test_inputs_are_generated_into_the_cache_once_then_copied(tmp_path: Path) -> None:
    config = small()
    said: list[str] = []
    first = ensure_inputs(config, LocalStorage(tmp_path / "lab1"), said.append, tmp_path / "c")
    assert [line.split(" ")[1] for line in said[:1]] == ["generating"]
    said.clear()
    second = ensure_inputs(config, LocalStorage(tmp_path / "lab2"), said.append, tmp_path / "c")
    assert second == first
    assert not any("generating" in line for line in said)
    assert any(line.startswith("inputs: copying 2 tasks") for line in said)
    name = first[1].files[1]
    assert (tmp_path / "lab2" / name).read_bytes() == (tmp_path / "lab1" / name).read_bytes()
    assert (tmp_path / "lab2" / MANIFEST).is_file()


def test_other_parameters_get_a_folder_of_their_own(tmp_path: Path) -> None:
    first = ensure_inputs(small(), LocalStorage(tmp_path / "a"), lambda line: None, tmp_path / "c")
    seeded = ensure_inputs(small(1), LocalStorage(tmp_path / "b"), print, tmp_path / "c")
    assert len(list((tmp_path / "c").iterdir())) == 2
    name = first[0].files[0]
    assert (tmp_path / "a" / name).read_bytes() != (tmp_path / "b" / name).read_bytes()
    assert seeded != first
