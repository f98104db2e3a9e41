"""`invoke data-put / data-ls / data-get / data-rm` on a spot lab's shared folder: the same
program a stack's head pod runs (launch/shared_data.py), here on this machine. A file goes in
whole or not at all; a bad name, a missing file and a full disk are one line each, exit 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from launch import pulumi_cli
from launch.shared_data import (
    CHUNK,
    DataError,
    SharedFolder,
    check_name,
    get,
    listing,
    put,
    stack_folder,
)
from launch.stack_config import read_stack_config
from spotlab.state import STATE_DIR_ENV
from tests.helpers.offline_cache import cached_run

pytestmark = pytest.mark.subprocess

REPO = Path(__file__).resolve().parents[2]
LAB_ID = "d47a01"


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A recorded lab (its state file names its shared folder): what data-* find by --lab."""
    folder = tmp_path / "shared"
    folder.mkdir()
    states = tmp_path / "states"
    states.mkdir()
    (states / f"{LAB_ID}.json").write_text(json.dumps({
        "lab_id": LAB_ID, "config": {}, "temp_dir": None, "shared_dir": str(folder),
        "supervisor_pid": None, "up": False, "starter": {}, "nodes": []}))
    monkeypatch.setenv(STATE_DIR_ENV, str(states))
    return folder


def invoke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, text=True,
                          capture_output=True, timeout=120, env=os.environ.copy())


def test_put_ls_get_rm_round_trip_through_the_tasks(shared: Path, tmp_path: Path) -> None:
    data = os.urandom(2 * CHUNK + 17)
    (tmp_path / "digits.npz").write_bytes(data)
    put_run = invoke("data-put", str(tmp_path / "digits.npz"), "--lab", LAB_ID)
    assert put_run.returncode == 0, put_run.stderr
    assert (shared / "digits.npz").read_bytes() == data
    assert [p.name for p in shared.iterdir()] == ["digits.npz"]  # no partial left
    renamed = invoke("data-put", str(tmp_path / "digits.npz"), "train.npz", "--lab", LAB_ID)
    assert renamed.returncode == 0 and (shared / "train.npz").read_bytes() == data
    ls = invoke("data-ls", "--lab", LAB_ID)
    assert ls.returncode == 0, ls.stderr
    assert "digits.npz" in ls.stdout and f"{len(data)} bytes" in ls.stdout
    back = tmp_path / "back"
    back.mkdir()
    got = invoke("data-get", "train.npz", str(back), "--lab", LAB_ID)
    assert got.returncode == 0, got.stderr
    assert (back / "train.npz").read_bytes() == data
    removed = invoke("data-rm", "digits.npz", "--lab", LAB_ID)
    assert removed.returncode == 0 and not (shared / "digits.npz").exists()


@pytest.mark.parametrize(("args", "line"), [
    (["data-put", "{local}", "../escape"], "error: NAME: '../escape' holds a path separator"),
    (["data-put", "{local}", ".."], "error: NAME: '..' holds '..'"),
    (["data-put", "{local}", "a/b"], "error: NAME: 'a/b' holds a path separator"),
    (["data-put", "{missing}"], "error: LOCAL: {missing}: no such file"),
    (["data-get", "nothing.npz", "{tmp}"], "error: NAME: no 'nothing.npz' in spot lab "
                                           "d47a01's shared folder (data-ls lists it)"),
    (["data-rm", "nothing.npz"], "error: NAME: no 'nothing.npz' in spot lab d47a01's shared "
                                 "folder (data-ls lists it)"),
    (["data-put", "{local}", "--lab", "d47a01", "--stack", "dev"],
     "error: --lab: give --lab or --stack, not both"),
])
def test_bad_input_is_one_line_and_exit_2_with_nothing_written(
        shared: Path, tmp_path: Path, args: list[str], line: str) -> None:
    (tmp_path / "local.bin").write_bytes(b"x" * 10)
    values = {"local": str(tmp_path / "local.bin"), "missing": str(tmp_path / "missing.bin"),
              "tmp": str(tmp_path)}
    run = invoke(*[arg.format(**values) for arg in args])
    assert run.returncode == 2
    (shown,) = run.stderr.splitlines()
    assert shown.startswith(line.format(**values)), shown
    assert list(shared.iterdir()) == []


def test_a_full_disk_is_one_line_and_leaves_no_partial_file(tmp_path: Path) -> None:
    """The partial file is /dev/full here: the kernel's own ENOSPC, mid-write."""
    root = tmp_path / "shared"
    root.mkdir()
    (root / ".big.bin.partial").symlink_to("/dev/full")
    local = tmp_path / "big.bin"
    local.write_bytes(os.urandom(3 * CHUNK))
    with pytest.raises(DataError) as error:
        put(SharedFolder("the test's folder", str(root)), local, None, progress=lambda _: None)
    assert str(error.value).startswith("no space left in the test's folder for 'big.bin': ")
    assert "\n" not in str(error.value)
    assert list(root.iterdir()) == []


def test_more_than_the_free_space_is_refused_before_a_byte_moves(tmp_path: Path) -> None:
    root = tmp_path / "shared"
    root.mkdir()
    sparse = tmp_path / "huge.bin"
    size = shutil.disk_usage(root).free + (1 << 30)
    with sparse.open("wb") as handle:  # more than the disk has free, without using it
        handle.truncate(size)
    lines: list[str] = []
    with pytest.raises(DataError, match=rf"^no space left in the test's folder for 'huge.bin': "
                                        rf"{size} bytes to write, \d+ free$"):
        put(SharedFolder("the test's folder", str(root)), sparse, None, progress=lines.append)
    assert list(root.iterdir()) == []


def test_a_large_file_shows_its_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("launch.shared_data.PROGRESS_EVERY_S", 0.0)
    root = tmp_path / "shared"
    root.mkdir()
    local = tmp_path / "data.bin"
    local.write_bytes(os.urandom(4 * CHUNK))
    lines: list[str] = []
    folder = SharedFolder("the test's folder", str(root))
    put(folder, local, None, progress=lines.append)
    assert lines[-1].startswith("put data.bin: 4.0 of 4.0 MiB (100%), ")
    assert [entry["name"] for entry in listing(folder)["entries"]] == ["data.bin"]
    lines.clear()
    get(folder, "data.bin", tmp_path / "copy.bin", progress=lines.append)
    assert lines[-1].startswith("get data.bin: 4.0 of 4.0 MiB (100%), ")
    assert (tmp_path / "copy.bin").read_bytes() == local.read_bytes()


@pytest.mark.parametrize("name", ["..", "../x", "a/b", ".hidden", "", "-rf", "x" * 256])
def test_names_that_could_leave_or_hide_in_the_folder_are_refused(name: str) -> None:
    with pytest.raises(DataError, match=r"^NAME: "):
        check_name(name)


def _deployed(outputs: dict[str, Any]) -> dict[str, Any]:
    """Outputs as `pulumi stack output --json --show-secrets` prints them (plain JSON)."""
    return json.loads(json.dumps(outputs, default=str))


def test_a_stack_without_a_shared_file_system_is_one_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    spot = json.loads(read_stack_config("dev")["spotburst:spotCluster"])
    run = cached_run({"spotburst:spotCluster": json.dumps({**spot, "sharedStorage": "none"})})
    monkeypatch.setattr(pulumi_cli, "stack_outputs", lambda stack, show_secrets=False:
                        _deployed(run.outputs))
    with pytest.raises(DataError, match=r"^--stack: stack dev has no shared file system "
                                        r"\(spotburst:spotCluster.sharedStorage is none"):
        with stack_folder("dev", None):
            pass


def test_the_stack_path_names_what_it_lacks_in_one_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the dev stack's own outputs (the program under mocks): an experiment without a
    RayCluster, then a machine without kubectl."""
    outputs = _deployed(cached_run().outputs)
    monkeypatch.setattr(pulumi_cli, "stack_outputs", lambda stack, show_secrets=False: outputs)
    with pytest.raises(DataError, match=r"^--experiment: 'burst' has no RayCluster on stack "
                                        r"dev \(deployed: doll, elastic, rl, inference\)$"):
        with stack_folder("dev", "burst"):
            pass
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(DataError, match=r"^kubectl is not installed \(needed for --stack\)$"):
        with stack_folder("dev", None):
            pass
