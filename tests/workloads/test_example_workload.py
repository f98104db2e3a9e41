"""The example workload (docs/adding-a-workload.md) end to end on the local default, as a run
task runs it: its command line from its spec, a Ray started for the run, its progress lines,
its results folder, its headline."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from launch.example import run_example
from launch.headline import MISSING, headline_of
from launch.options import TargetOptions
from workloads.common.options import OptionError
from workloads.example.__main__ import main
from workloads.example.options import EXAMPLE_SPEC, ExampleOptions


@pytest.mark.ray
@pytest.mark.subprocess
def test_the_example_runs_end_to_end_on_the_local_default(tmp_path: Path) -> None:
    shown: list[str] = []
    options = ExampleOptions(tasks=3, samples=40_000, seed=7)
    folder = run_example(options, TargetOptions(out=tmp_path / "run"), show=shown.append)
    assert folder == (tmp_path / "run").resolve()
    assert [line for line in shown if line.startswith("example: task")] == [
        f"example: task {n}/3 done" for n in (1, 2, 3)]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["points"] == 120_000 and summary["target"] == "local"
    assert abs(summary["pi"] - math.pi) < 0.05 and summary["abs_error"] < 0.05
    rows = [json.loads(line) for line in (folder / "records" / "tasks.jsonl").open()]
    assert [row["task"] for row in rows] == [0, 1, 2]
    assert summary["pi"] == 4.0 * sum(row["inside"] for row in rows) / 120_000
    parameters = json.loads((folder / "provenance.json").read_text())["parameters"]
    assert EXAMPLE_SPEC.from_text({"tasks": "3", "samples": "40000", "seed": "7"}) == \
        ExampleOptions(**{k: parameters[k] for k in ("tasks", "samples", "seed")})
    table = headline_of("example", folder)
    assert f"{summary['pi']:.5f}" in table and MISSING not in table


def test_bad_input_is_one_line_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--tasks", "0"]) == 2
    assert capsys.readouterr().err == "error: --tasks: expected an integer in [1, 1000], got '0'\n"
    with pytest.raises(OptionError, match="^--samples: at most 10"):
        ExampleOptions(tasks=1000, samples=10_000_000)
