"""Running a documented command exactly as the docs show it (only `--out` added), as a new
user would from the project's root: a fresh process, the installed `invoke`."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from launch.headline import render_headline
from spotlab.state import STATE_DIR_ENV

PROJECT_DIR = Path(__file__).resolve().parents[2]


def run_documented(command: str, out: Path, timeout_s: float) -> dict[str, Any]:
    """Run `command` (as written in the docs, starting with `invoke`) with `--out OUT`;
    assert it succeeded and ended with its headline table (launch/headline.py, from its
    summary.json) and where its results are, with no log line of Ray Train's own (or of Ray's
    Jobs client, or of torchft's replica groups) on the terminal; return its summary.json."""
    argv = shlex.split(command)
    assert argv[0] == "invoke", command
    cut = argv.index("--") if "--" in argv else len(argv)
    argv = [*argv[:cut], "--out", str(out), *argv[cut:]]
    done = subprocess.run([sys.executable, "-m", *argv], cwd=PROJECT_DIR, capture_output=True,
                          text=True, timeout=timeout_s)
    assert done.returncode == 0, (f"{command}: exit {done.returncode}\n"
                                  f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    assert str(out) in done.stdout, done.stdout[-2000:]
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    table = render_headline(argv[1].removeprefix("run-"), summary)
    assert done.stdout.rstrip().endswith(f"{table}\n{done.stdout.rstrip().splitlines()[-1]}"), \
        done.stdout[-2000:]
    assert str(out) in done.stdout.rstrip().splitlines()[-1]
    assert "(RayTrainWorker" not in done.stdout and "(TrainController" not in done.stdout
    assert "(ReplicaGroup" not in done.stdout and "(LighthouseServerActor" not in done.stdout
    shown = done.stdout + done.stderr
    assert not [line for line in RAY_CLIENT_LINES if line in shown], shown[-2000:]
    return summary


RAY_CLIENT_LINES = ("Uploading package", "Creating a file package", "WebSocket closed for job")
"""Ray's Jobs client's own lines in the launcher's process: kept in ray-traces.log."""


def run_documented_on_a_new_lab(command: str, factory: pytest.TempPathFactory, name: str,
                                timeout_s: float) -> tuple[dict[str, Any], Path]:
    """run_documented with its results in a new folder and the spot lab's state in another
    (a lab of its own); returns the summary and the results folder."""
    out = factory.mktemp(name) / "results"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_DIR_ENV, str(factory.mktemp("spotlab-state")))
        return run_documented(command, out, timeout_s=timeout_s), out
