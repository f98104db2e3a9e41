"""The inputs cache: a run copies inputs of the same parameters instead of generating them,
and inputs of other parameters never come from another set's folder."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from workloads.burst.inputs import MANIFEST, InputsProgress, ensure_inputs
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


def test_a_line_says_how_far_the_inputs_are_while_they_are_written(tmp_path: Path) -> None:
    """Generating and copying say tasks done and bytes written so far (here after every
    file: progress_every_s 0), the last file's line left to the summary that follows."""
    config = replace(small(), ps_image_side=480)  # noisy JPEGs of about 0.13 MB
    said: list[str] = []
    tasks = ensure_inputs(config, LocalStorage(tmp_path / "lab1"), said.append, tmp_path / "c",
                          progress_every_s=0.0)
    cached = next((tmp_path / "c").iterdir())  # the one folder of these parameters
    written = [(cached / name).stat().st_size for task in tasks for name in task.files]
    generated = [line for line in said if " generated, " in line]
    assert generated == [  # 2 directories of 2 images: a line after each but the last image
        f"inputs: {done}/2 tasks generated, {sum(written[:count]) / 1e6:.1f} MB"
        for count, done in ((1, 0), (2, 1), (3, 1))]
    assert len({line.rsplit(", ", 1)[1] for line in generated}) == 3  # bytes grow line by line
    assert [line for line in said if " copied, " in line] == [
        f"inputs: 1/2 tasks copied, {tasks[0].nbytes / 1e6:.1f} MB"]
    assert said.index(generated[-1]) < said.index(f"inputs: {sum(written) / 1e6:.1f} MB in 2 tasks")


def test_progress_lines_come_once_the_interval_has_passed_and_not_sooner() -> None:
    ticks = iter([0.0, 0.8, 1.6, 2.4, 3.2, 4.3, 5.0, 6.0, 9.0])  # the start, then one per file
    said: list[str] = []
    progress = InputsProgress(8, "generated", said.append, every_s=2.0, clock=lambda: next(ticks))
    for done in range(1, 9):
        progress.wrote(1_500_000, done)
    assert said == [
        "inputs: 3/8 tasks generated, 4.5 MB",  # at 2.4 s
        "inputs: 6/8 tasks generated, 9.0 MB",  # at 5.0 s (4.3 s was less than 2 s after)
    ]  # at 9.0 s every task is done: the caller's summary line comes instead
