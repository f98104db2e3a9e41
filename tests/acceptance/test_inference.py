"""The inference cluster exactly as docs/inference.md shows it, each command a fresh
`invoke` process: the walkthrough's commands in the order the page gives them (infer-up on
a new spot lab, the demo's files, a job to its end, infer-down), the bad-input example, and
`invoke run-inference --out DIR`, the experiment with two workers and the coordinator
killed, judged from its summary.json."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launch.inference import STATE_DIR_ENV
from spotlab.state import STATE_DIR_ENV as LAB_STATE_DIR_ENV
from tests.helpers.acceptance import run_documented
from workloads.inference.coordinator import PIPELINE_DEPTH

pytestmark = [pytest.mark.ray, pytest.mark.subprocess, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "inference.md"
WALKTHROUGH_MARK = "<!-- acceptance: walkthrough"


def documented_block(after: str) -> list[str]:
    """The command lines of the first ```bash block after the line starting with `after`."""
    text = DOCS.read_text()
    start = text.index(after)
    block = text[text.index("```bash\n", start) + len("```bash\n"):]
    return [line for line in block[:block.index("```")].splitlines() if line.strip()]


def invoke(line: str, cwd: Path, env: dict[str, str],
           timeout_s: float = 300.0) -> subprocess.CompletedProcess[str]:
    words = shlex.split(line)
    assert words[0] == "invoke", line
    return subprocess.run([sys.executable, "-m", "invoke", *words[1:]], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout_s)


@pytest.fixture
def user(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A user's folder (the project's tasks found there) and environment: private state
    folders, so the test's lab and service are its own."""
    (tmp_path / "tasks.py").symlink_to(REPO / "tasks.py")
    env = {**os.environ, STATE_DIR_ENV: str(tmp_path / "inference-state"),
           LAB_STATE_DIR_ENV: str(tmp_path / "spotlab-state")}
    return tmp_path, env


def test_the_walkthrough_runs_as_the_docs_show_it(user: tuple[Path, dict[str, str]]) -> None:
    cwd, env = user
    lines = documented_block(WALKTHROUGH_MARK)
    assert lines[0].startswith("invoke infer-up") and lines[-1] == "invoke infer-down"
    store: Path | None = None
    down = False
    try:
        for line in lines:
            done = invoke(line, cwd, env)
            assert done.returncode == 0, f"{line}: {done.stderr[-1500:]}"
            down = down or line == "invoke infer-down"
            if line.startswith("invoke infer-up"):
                store = Path(re.findall(r"file store (\S+)", done.stdout)[0])
            if line.startswith("invoke files-ls"):
                assert done.stdout.split() == ["small_label", "small_model", "small_testset"]
            if line.startswith("invoke job-add"):
                assert "450 queries in 15 sub-jobs" in done.stdout
            if line.startswith("invoke job-status"):  # "run it again until done"
                deadline = time.monotonic() + 120
                while "digits: done" not in done.stdout and time.monotonic() < deadline:
                    done = invoke(line, cwd, env)
                    assert done.returncode == 0, done.stderr
                assert "digits: done, 450/450 queries (100.0 %)" in done.stdout, done.stdout
                assert float(re.findall(r"accuracy ([0-9.]+)", done.stdout)[0]) > 0.9
            if line == "invoke members":
                assert "workers:" in done.stdout and "inference-worker-" in done.stdout
        assert not (cwd / "inference-state" / "service.json").exists()
        documented_bad_input(cwd, env)  # shown after the walkthrough; refused by the CLI
    finally:
        if not down:
            invoke("invoke infer-down", cwd, env)
        if store is not None and store.is_relative_to(REPO / "results"):
            shutil.rmtree(store, ignore_errors=True)


def documented_bad_input(cwd: Path, env: dict[str, str]) -> None:
    """The page's example of a bad input: its command gives exactly its error line."""
    text = DOCS.read_text()
    example = text[text.index("A bad input is one line"):]
    example = example[example.index("```\n") + 4:]
    command, expected = example[:example.index("```")].strip().splitlines()
    done = invoke(command.removeprefix("$ "), cwd, env)
    assert (done.returncode, done.stderr.strip()) == (2, expected), done.stderr


def test_run_inference_answers_every_query_once_through_both_failures(tmp_path: Path) -> None:
    [command] = documented_block("## The experiment in one command")
    assert command == "invoke run-inference"
    out = tmp_path / "run"
    summary = run_documented(command, out, timeout_s=900.0)
    assert summary["failures_seen"] == {"workers_killed": 2, "coordinator_killed": True}
    assert summary["coordinator_incarnations"] >= 2
    # each worker was killed half-way through a sub-job; that sub-job, and the one it held
    # queued behind it if any (a worker gets its next sub-job while one runs), is what the
    # service records as run again because of it, each once
    killed = [event for event in summary["failures"] if event["killed"] != "coordinator"]
    assert len(killed) == 2
    for event in killed:
        holding = event["holding"]
        assert 1 <= holding["answered"] <= holding["of"], event
        reran = event["reran"]
        assert {"job": holding["job"], "sub_job": holding["sub_job"]} in reran, event
        assert len(reran) <= PIPELINE_DEPTH, event
        assert len({(entry["job"], entry["sub_job"]) for entry in reran}) == len(reran), event
    assert sum(job["reruns"] for job in summary["jobs_final"].values()) == sum(
        len(event["reran"]) for event in killed)
    checked = summary["exactly_once"]
    assert checked["ok"] and checked["lost"] == 0 and checked["duplicated"] == 0
    assert checked["mismatched"] == 0 and checked["unknown"] == 0
    for job in checked["jobs"].values():
        assert job["answered"] == job["queries"] > 0
    spread = summary["rate_spread_after_window"]
    # fair share: the seed's claim (rates within 20 %) at every sample, and the typical
    # sample near equal; how near, under controlled load, is the benchmark's business
    assert spread["samples"] > 0 and spread["median"] <= 1.05 and spread["max"] <= 1.2, spread
    for figure in ("query_rate.png", "latency_cdf.png"):
        assert (out / figure).stat().st_size > 0
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["parameters"]["store"] == str(out / "store")
