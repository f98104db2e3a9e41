"""How a benchmark says how it was made: the command as a reader would type it."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.report import header, relative_command


def test_paths_inside_the_project_are_shown_relative_and_others_left_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    command = (f"python -m benchmarks.burst_speedup --out {tmp_path}/results/v3 "
               f"--inputs-cache={tmp_path}/inputs --json /elsewhere/rows.json --bw 30")
    assert relative_command(command) == (
        "python -m benchmarks.burst_speedup --out results/v3 --inputs-cache=inputs "
        "--json /elsewhere/rows.json --bw 30")
    made = {"command": command, "cores": 2, "load_average": [1.5, 2.0, 2.5],
            "date": "2026-11-27 09:41 UTC", "commit": "abc"}
    assert header(made).startswith(
        "`python -m benchmarks.burst_speedup --out results/v3 --inputs-cache=inputs ")
    assert str(tmp_path) not in header(made)
