"""Bad inputs to the inference commands, each as a user types it (`invoke ...` in a fresh
process): one line naming the flag or file, exit code 2, nothing started or written. No
service is needed for any of them: the CLI refuses them before reaching one (or, for the
files, the store the service record names)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from launch.inference import STATE_DIR_ENV, ServiceRecord

pytestmark = pytest.mark.subprocess

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A service record naming a store in tmp_path (nothing listens at its URL)."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    ServiceRecord("127.0.0.1:1", {}, str(tmp_path / "store"), None, None, 0.0, "token",
                  "http://127.0.0.1:1").save()
    (tmp_path / "model.npz").write_bytes(b"x")
    return {**os.environ, STATE_DIR_ENV: str(tmp_path / "state")}


CASES = [
    (("files-put", "{tmp}/model.npz", "."), "error: NAME: expected a name of 1-64"),
    (("files-put", "{tmp}/model.npz", "a/b"), "error: NAME: expected a name of 1-64"),
    (("files-put", "{tmp}/model.npz", ".."), "error: NAME: expected a name of 1-64"),
    (("files-put", "{tmp}", "m"), "error: LOCAL '{tmp}': no such file"),
    (("files-get", "../x", "{tmp}/x"), "error: NAME: expected a name of 1-64"),
    (("files-get", "ghost", "{tmp}/x"), "error: NAME 'ghost': no such file in the store"),
    (("infer-up", "--store", "s3://"), "error: --store: expected s3://BUCKET/PREFIX, got "
                                       "'s3://' (no bucket)"),
    (("infer-up", "--store", "ftp://x/y"), "error: --store: expected a folder or s3://"),
    (("infer-up", "--store", "s3://b/p", "--store-endpoint", "nohost"),
     "error: --store-endpoint: expected http(s)://HOST:PORT"),
    (("infer-up", "--store-endpoint", "http://127.0.0.1:9"),
     "error: --store-endpoint: only with an s3:// store"),
    (("job-add", "j", "--model", "m", "--testset", "t", "--labels", "l", "--batch-size",
      "1.5"), "error: --batch-size: expected an integer in [1, 100000], got '1.5'"),
    (("job-add", "j", "--model", "m", "--testset", "t", "--labels", "l", "--batch-size",
      "100000000000000000000000000000"), "error: --batch-size: expected an integer"),
    (("job-add", "x" * 65, "--model", "m", "--testset", "t", "--labels", "l"),
     "error: NAME: expected a name of 1-64"),
    (("job-add", "j", "--model", "../m", "--testset", "t", "--labels", "l"),
     "error: --model: expected a name of 1-64"),
    (("job-start", "a/b"), "error: NAME: expected a name of 1-64"),
    (("files-demo", "--dir", "{tmp}/model.npz"),
     "error: --dir: {tmp}/model.npz is a file, not a folder"),
    (("files-demo",), "error: --dir: required"),
    (("files-demo", "--dir", "{tmp}/d", "--repeat", "abc"), "error: --repeat: expected an "
                                                            "integer in [1, 10000], got 'abc'"),
    (("run-inference", "--repeat", "0"), "error: --repeat: expected an integer in [1, 10000]"),
    (("run-inference", "--fail-coordinator", "2"), "error: --fail-coordinator: expected an "
                                                   "integer in [0, 1]"),
    (("run-inference", "--batch-size", "1"), "error: --batch-size: 202500 queries per job "
                                             "(--repeat 450) in batches of 1 make 202500 "
                                             "sub-jobs, more than 100000"),
    (("run-inference", "--worker-memory-mb", "100"), "error: --worker-memory-mb: expected an "
                                                     "integer in [512, 65536]"),
    (("infer-up", "--worker-memory-mb", "1e9"), "error: --worker-memory-mb: expected an "
                                                "integer"),
]


@pytest.mark.parametrize("args, expected", CASES, ids=[" ".join(a)[:50] for a, _ in CASES])
def test_a_bad_input_is_one_line_naming_it(env: dict[str, str], tmp_path: Path,
                                           args: tuple[str, ...], expected: str) -> None:
    line = [arg.format(tmp=tmp_path) for arg in args]
    done = subprocess.run([sys.executable, "-m", "invoke", *line], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith(expected.format(tmp=tmp_path)), done.stderr
    assert not (tmp_path / "store").exists()  # nothing written to the store
    record = json.loads((tmp_path / "state" / "service.json").read_text())
    assert record["command_url"] == "http://127.0.0.1:1"


def test_files_demo_writes_files_that_job_add_would_take(tmp_path: Path) -> None:
    from workloads.inference.models import array_header
    from workloads.inference.runtime import check_model_bounded

    done = subprocess.run([sys.executable, "-m", "invoke", "files-demo", "--dir",
                           str(tmp_path / "demo")], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    names = sorted(path.name for path in (tmp_path / "demo").iterdir())
    assert names == [f"{size}_{kind}" for size in ("large", "small") for kind in (
        "label.npy", "model.onnx", "testset.npy")]
    for size in ("small", "large"):
        shape, dtype = array_header((tmp_path / "demo" / f"{size}_testset.npy").read_bytes(),
                                    "t")
        labels = array_header((tmp_path / "demo" / f"{size}_label.npy").read_bytes(), "l")[0]
        model = check_model_bounded((tmp_path / "demo" / f"{size}_model.onnx").read_bytes(),
                                    "m", np.zeros((0, *shape[1:]), dtype))
        assert model.accepts(shape, dtype) is None and labels == (450,)
