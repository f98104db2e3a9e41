"""A lab's record is data we read back, never a licence: a crafted or damaged one (a path
outside the lab's folder, another lab's id, a namespace not the lab's, empty, truncated, an
unknown field) touches nothing outside what the lab's id names, `status` reports and skips a
corrupt record, and `down` still removes the lab's processes by their marker. No Ray: the
records are written here, the processes are sleeps started here. Its lab ids are used by no
other test file: `down` stops whatever carries a lab's marker on the whole machine, and the
test files run side by side."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import procs
from netem.lab import lab as two_site
from netem.lab.state import STATE_DIR_ENV as TWO_SITE_STATE_DIR_ENV
from netem.lab.state import CorruptLabRecord, LabNotFound, LabState, lab_namespaces
from spotlab import SpotLabConfig, SpotLabNotFound, lab_status, stop_lab
from spotlab.state import (
    CORRUPT,
    STATE_DIR_ENV,
    CorruptRecord,
    lab_temp_dir,
    node_marker,
    ports_of_other_labs,
    recorded_lab_ids,
    save_state,
    state_path,
)

pytestmark = pytest.mark.subprocess

SLEEP = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"]
CORRUPT_TEXTS = {
    "empty": "",
    "truncated": '{"lab_id": "7a0111", "config": {',
    "not an object": "[1, 2]",
    "nested": "[" * 100_000 + "]" * 100_000,
    "NaN": '{"lab_id": "7a0111", "config": {}, "supervisor_pid": NaN}',
    "another lab's id": '{"lab_id": "../../x", "config": {}}',
    "a pid of text": '{"lab_id": "7a0111", "config": {}, "supervisor_pid": "1; rm -rf /"}',
}


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Private record folders, the labs' temp dirs in this test's own folder, and a
    precious folder outside every lab, with a file in it."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "spotlabs"))
    monkeypatch.setenv(TWO_SITE_STATE_DIR_ENV, str(tmp_path / "labs"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    return {"spotlabs": tmp_path / "spotlabs", "labs": tmp_path / "labs", "precious": precious}


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    processes: list[subprocess.Popen[str]] = []
    yield processes
    procs.stop_children(processes, grace_s=5)


def sleep(started: list[subprocess.Popen[str]], marker: str) -> int:
    env = {key: value for key, value in os.environ.items() if key != procs.MARKER_ENV}
    process = subprocess.Popen(SLEEP, env={**env, procs.MARKER_ENV: marker},
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
    started.append(process)
    procs.wait_for_line(process, "up", timeout_s=30, name="sleep")
    return process.pid


def spot_record(lab_id: str, temp_dir: str) -> dict[str, Any]:
    state: dict[str, Any] = {
        "lab_id": lab_id, "config": SpotLabConfig(spot=1, on_demand=0).to_dict(),
        "temp_dir": temp_dir, "supervisor_pid": None, "up": True,
        "starter": {"pid": None, "start_time": None}, "nodes": []}
    save_state(state)
    return state


def assert_untouched(precious: Path) -> None:
    assert (precious / "thesis.tex").read_text() == "years of work"


@pytest.mark.parametrize("outside", ["precious", "precious/..", "link"])
def test_spot_lab_down_never_removes_a_recorded_folder_that_is_not_the_labs(
        folders: dict[str, Path], tmp_path: Path, outside: str) -> None:
    (tmp_path / "link").symlink_to(folders["precious"])
    lab_temp_dir("7a0111").mkdir()
    spot_record("7a0111", str(tmp_path / outside))
    progress: list[str] = []
    removed = stop_lab("7a0111", progress=progress.append)
    assert_untouched(folders["precious"])
    assert not any("directory" in item for item in removed), removed
    assert any("is not" in line and "left alone" in line for line in progress), progress
    assert recorded_lab_ids() == []


def test_two_site_lab_down_never_removes_a_recorded_folder_or_namespace_not_the_labs(
        folders: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    deleted: list[str] = []
    monkeypatch.setattr(two_site.netns, "delete_namespace", deleted.append)
    monkeypatch.setattr(two_site.netns, "existing_namespaces", lambda: set())
    LabState(lab_id="7ab123", temp_dir=str(folders["precious"]),
             namespaces=["default", "sb-other-onprem", *lab_namespaces("7ab123")[:1]]).save()
    progress: list[str] = []
    removed = two_site.stop_lab("7ab123", progress=progress.append)
    assert_untouched(folders["precious"])
    assert deleted == ["sb-7ab123-onprem"]
    assert removed == ["namespace sb-7ab123-onprem"]
    assert any("'default', 'sb-other-onprem' are not the lab's" in line for line in progress)
    assert any(f"{str(folders['precious'])!r} is not" in line for line in progress)


@pytest.mark.parametrize("lab_id", ["../../x", "/etc", "..", "a/b", "", "x" * 65, ".hidden",
                                    "-rf"])
def test_a_lab_id_that_is_not_a_name_is_refused_before_any_path_is_made(
        folders: dict[str, Path], lab_id: str) -> None:
    with pytest.raises(SpotLabNotFound, match="--lab: expected a name of"):
        stop_lab(lab_id)
    with pytest.raises(LabNotFound, match="--lab: expected a name of"):
        two_site.stop_lab(lab_id)


@pytest.mark.parametrize("kind", sorted(CORRUPT_TEXTS))
def test_a_corrupt_spot_lab_record_is_reported_and_skipped_and_down_still_removes_the_lab(
        folders: dict[str, Path], started: list[subprocess.Popen[str]], kind: str) -> None:
    folders["spotlabs"].mkdir()
    state_path("7a0111").write_text(CORRUPT_TEXTS[kind])
    spot_record("7b0222", str(lab_temp_dir("7b0222")))
    supervisor = sleep(started, node_marker("7a0111", "supervisor"))
    node = sleep(started, node_marker("7a0111", "spot-0"))
    other = sleep(started, node_marker("7b0222", "spot-0"))
    lab_temp_dir("7a0111").mkdir()

    status = lab_status()  # the only readable one; the corrupt one listed as such
    assert status["lab_id"] == "7b0222"
    assert status["other_labs"] == [{"lab_id": "7a0111", "condition": CORRUPT}]
    with pytest.raises(CorruptRecord) as asked:
        lab_status("7a0111")
    assert str(state_path("7a0111")) in str(asked.value) and "\n" not in str(asked.value)

    removed = stop_lab("7a0111", progress=lambda line: None)
    assert not procs.is_alive(supervisor) and not procs.is_alive(node)
    assert procs.is_alive(other)
    assert f"pid {supervisor}" in removed and f"pid {node}" in removed
    assert not lab_temp_dir("7a0111").exists() and not state_path("7a0111").exists()
    assert recorded_lab_ids() == ["7b0222"]
    assert_untouched(folders["precious"])


@pytest.mark.parametrize("text", [
    "", '{"lab_id": "7ab123", "temp', '{"lab_id": "7ab123", "surprise": 1}',
    '{"lab_id": "7ab123", "pids": ["1"]}', '{"lab_id": "zzz999"}',
])
def test_a_corrupt_two_site_lab_record_is_one_line_and_down_removes_what_its_id_names(
        folders: dict[str, Path], started: list[subprocess.Popen[str]],
        monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr(two_site.netns, "existing_namespaces", lambda: set())
    folders["labs"].mkdir()
    (folders["labs"] / "7ab123.json").write_text(text)
    ours = sleep(started, "7ab123")
    with pytest.raises(CorruptLabRecord) as status:
        two_site.lab_status("7ab123")
    assert "lab-down --lab 7ab123" in str(status.value) and "\n" not in str(status.value)
    temp_dir = Path(tempfile.gettempdir()) / "sb-7ab123"
    temp_dir.mkdir()
    removed = two_site.stop_lab(None, progress=lambda line: None)
    assert not procs.is_alive(ours)
    assert removed == [f"pid {ours}", f"directory {temp_dir}"]
    assert not (folders["labs"] / "7ab123.json").exists() and not temp_dir.exists()
    assert_untouched(folders["precious"])


def test_spot_lab_down_through_invoke_refuses_a_path_and_a_folder_for_the_events(
        folders: dict[str, Path], tmp_path: Path) -> None:
    """As users type them: each one line, exit 2, nothing removed."""
    spot_record("7c0333", str(lab_temp_dir("7c0333")))
    lab_temp_dir("7c0333").mkdir()
    (lab_temp_dir("7c0333") / "events.jsonl").write_text("{}\n")
    cases = [
        (["spot-lab-down", "--lab", str(folders["precious"])], "--lab: expected a name of"),
        (["spot-lab-down", "--lab", "../../precious"], "--lab: expected a name of"),
        (["lab-down", "--lab", str(folders["precious"])], "--lab: expected a name of"),
        (["lab-status", "--lab", "../precious"], "--lab: expected a name of"),
        (["spot-lab-status", "--lab", "x" * 300], "--lab: expected a name of"),
        (["spot-lab-down", "--lab", "7c0333", "--save-events", str(folders["precious"])],
         f"--save-events: {folders['precious']} is a folder"),
        (["spot-lab-down", "--lab", "7c0333", "--save-events",
          str(folders["precious"] / "thesis.tex" / "events.jsonl")],
         f"--save-events: {folders['precious'] / 'thesis.tex'} is a file"),
    ]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    for argv, line in cases:
        done = subprocess.run([sys.executable, "-m", "invoke", *argv], env=env,
                              cwd=Path(__file__).resolve().parents[2], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 2, (argv, done.stderr[-800:])
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, \
            (argv, done.stderr[-800:])
        assert line in done.stderr, (argv, done.stderr)
    assert_untouched(folders["precious"])
    assert state_path("7c0333").exists() and lab_temp_dir("7c0333").is_dir()  # untouched


def test_a_half_written_event_does_not_break_the_labs_status(folders: dict[str, Path]) -> None:
    spot_record("7d0444", str(lab_temp_dir("7d0444")))
    lab_temp_dir("7d0444").mkdir()
    (lab_temp_dir("7d0444") / "events.jsonl").write_text(
        '{"event": "join", "node": "head"}\n' + "[" * 5000 + "\n" + '{"event": "noti')
    assert lab_status("7d0444")["events"] == [{"event": "join", "node": "head"}]


def test_a_lab_avoids_the_ports_another_lab_handed_to_its_nodes(
        folders: dict[str, Path]) -> None:
    # a port a node was given but has not bound looks free to a second lab's supervisor
    first = spot_record("7a0111", str(folders["spotlabs"]))
    first["nodes"] = [{"name": "head", "ports": {"gcs": 21001, "metrics_export": 21002}},
                      {"name": "spot-0", "ports": {"node_manager": 21003}}]
    save_state(first)
    second = spot_record("7a0222", str(folders["spotlabs"]))
    second["nodes"] = [{"name": "head", "ports": {"gcs": 22001}}]
    save_state(second)
    spot_record("7a0333", str(folders["spotlabs"]))
    assert ports_of_other_labs("7a0222") == {21001, 21002, 21003}
    assert ports_of_other_labs("7a0111") == {22001}
