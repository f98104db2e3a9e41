from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from workloads.common.provenance import GIT_COMMIT_ENV, git_commit, provenance, sha256_of
from workloads.common.results import ResultsWriter, default_location, read_records
from workloads.common.storage import LocalStorage, copy_all, open_storage, write_atomically
from workloads.common.transport import encode, find_in_log


def test_writer_writes_the_folder_shape(tmp_path: Path, capsys) -> None:
    writer = ResultsWriter("demo", str(tmp_path / "run"))
    writer.add_records("timeline", [{"t": 0.0}, {"t": 1.5}])
    writer.add_records("timeline", [{"t": 2.0}])
    storage = writer.finish({"answer": 42}, {"seeds": {"seed": 1}}, to_log=True)
    assert storage.names() == ["provenance.json", "records/timeline.jsonl", "summary.json"]
    assert json.loads(storage.read_bytes("summary.json")) == {"answer": 42}
    assert [row["t"] for row in read_records(storage, "timeline")] == [0.0, 1.5, 2.0]
    carried = find_in_log("noise\n" + capsys.readouterr().out + "more noise\n")
    assert carried is not None and carried["summary.json"] == storage.read_bytes("summary.json")


def test_nothing_is_written_before_finish(tmp_path: Path) -> None:
    ResultsWriter("demo", str(tmp_path / "run")).add_records("x", [{"a": 1}])
    assert not (tmp_path / "run").exists()


def test_default_location_is_per_workload_and_time() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert default_location("doll", moment) == "results/doll/20260102T030405Z"


def test_transport_refuses_paths_leaving_the_folder() -> None:
    line = encode({"../escape": b"x"})
    try:
        find_in_log(line)
    except ValueError as error:
        assert "unsafe" in str(error)
    else:
        raise AssertionError("an archive escaping the folder was accepted")


def test_provenance_records_inputs_and_the_passed_commit(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(GIT_COMMIT_ENV, "abc123")
    trace = tmp_path / "trace.json"
    trace.write_text("{}")
    document = provenance({"k": 4}, {"trace": trace}, "local", {"seed": 7})
    assert document["git_commit"] == "abc123"
    assert document["inputs"]["trace"] == {"file": "trace.json", "sha256": sha256_of(trace)}
    assert document["ray"] == "2.60.0" and document["seeds"] == {"seed": 7}


def test_local_storage_copy(tmp_path: Path) -> None:
    source = open_storage(str(tmp_path / "a"))
    source.write_bytes("records/x.jsonl", b"1\n")
    assert copy_all(source, LocalStorage(tmp_path / "b")) == ["records/x.jsonl"]
    assert (tmp_path / "b" / "records" / "x.jsonl").read_bytes() == b"1\n"


class WriteFailed(Exception):
    pass


def test_a_file_is_replaced_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = LocalStorage(tmp_path / "store")
    storage.write_bytes("jobs/a/claims.json", b"old")
    real_fdopen = os.fdopen
    seen_during_write: list[tuple[list[str], bytes]] = []

    class StopsHalfWay:
        """A file handle whose write stops with an error after half of the data is in."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.handle = real_fdopen(*args, **kwargs)

        def __enter__(self) -> StopsHalfWay:
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.close()

        def fileno(self) -> int:
            return self.handle.fileno()

        def write(self, data: bytes) -> int:
            self.handle.write(data[: len(data) // 2])
            self.handle.flush()
            seen_during_write.append((storage.names(),
                                      storage.read_bytes("jobs/a/claims.json")))
            raise WriteFailed

    monkeypatch.setattr(os, "fdopen", StopsHalfWay)
    with pytest.raises(WriteFailed):
        storage.write_bytes("jobs/a/claims.json", b"new content")
    # mid-write a reader saw the old file, and no scratch file among the names
    assert seen_during_write == [(["jobs/a/claims.json"], b"old")]
    # after the failure: the old file, and nothing else left in its folder
    assert [p.name for p in (tmp_path / "store" / "jobs" / "a").iterdir()] == ["claims.json"]
    assert storage.read_bytes("jobs/a/claims.json") == b"old"
    monkeypatch.undo()
    storage.write_bytes("jobs/a/claims.json", b"new content")
    assert storage.read_bytes("jobs/a/claims.json") == b"new content"
    umask = os.umask(0o027)
    try:
        storage.write_bytes("jobs/a/claims.json", b"under another umask")
    finally:
        os.umask(umask)
    assert (tmp_path / "store" / "jobs" / "a" / "claims.json").stat().st_mode & 0o777 == 0o640


def test_a_private_file_is_its_owners_alone(tmp_path: Path) -> None:
    write_atomically(tmp_path / "service.json", b"{}", private=True)
    assert (tmp_path / "service.json").stat().st_mode & 0o777 == 0o600


@pytest.mark.subprocess
def test_a_checkout_with_changed_or_new_files_is_recorded_as_dirty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(GIT_COMMIT_ENV, raising=False)
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "train.py").write_text("steps = 1\n")
    subprocess.run([*git, "add", "train.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    (tmp_path / ".gitignore").write_text("results/\n")
    subprocess.run([*git, "add", ".gitignore"], check=True)
    subprocess.run([*git, "commit", "-qm", "two"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "summary.json").write_text("{}\n")  # ignored: not code
    assert git_commit(tmp_path) == head
    (tmp_path / "model.py").write_text("layers = 2\n")  # a new module: code not in the commit
    assert git_commit(tmp_path) == f"{head}+dirty"
    (tmp_path / "model.py").unlink()
    (tmp_path / "train.py").write_text("steps = 2\n")
    assert git_commit(tmp_path) == f"{head}+dirty"
    assert git_commit(tmp_path / "missing") == "unknown"
