"""The inference service's boundary around a tenant's model, without Ray: the external-data
walk over every place a tensor can sit; the runtime process every model runs in (an empty
folder, an environment without the parent's secrets, its own memory limit, the very bytes
that were checked, a budget for loaded models); a runtime that dies or never answers; the
store reading no link."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import hostile_models
from tests.helpers.hostile_models import EXTERNAL_DATA, SECRET_NAME
from workloads.inference.models import (
    ModelFileError,
    ModelMemoryError,
    external_tensors,
    read_signature,
    sha256,
    train_model,
)
from workloads.inference.runtime import (
    MemoryBudget,
    ModelRuntime,
    RuntimeDied,
    RuntimeTimedOut,
    check_model_bounded,
    resident_bytes,
)

RUNTIME_BYTES = MemoryBudget.of_mib(1024).runtime_bytes


@pytest.mark.parametrize("place", list(EXTERNAL_DATA))
def test_a_tensor_kept_outside_the_model_is_refused_wherever_it_sits(place: str) -> None:
    build, named = EXTERNAL_DATA[place]
    data = build()
    import onnx

    found = external_tensors(onnx.load_model_from_string(data))
    assert found and all(named in where for where in found), found
    with pytest.raises(ModelFileError) as refused:
        read_signature(data, "m")
    message = str(refused.value)
    assert message.startswith("m: ") and named in message and "external data" in message
    assert "\n" not in message


def test_a_self_contained_model_has_no_external_tensor() -> None:
    import onnx

    for size in ("small", "large"):
        assert external_tensors(onnx.load_model_from_string(train_model(size)[0])) == []


@pytest.fixture
def runtime() -> Iterator[ModelRuntime]:
    with ModelRuntime(RUNTIME_BYTES, timeout_s=20.0, session_bytes=3 * 2**20) as running:
        yield running


@pytest.mark.subprocess
def test_the_runtime_runs_in_an_empty_folder_without_the_parents_secrets(
        runtime: ModelRuntime, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Even a model past every check would find no file beside it and no secret."""
    monkeypatch.setenv("SPOTBURST_INFERENCE_TOKEN", "the-service-token")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "the-cloud-key")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "the-ray-token")
    monkeypatch.chdir(tmp_path)
    (tmp_path / SECRET_NAME).write_text("the worker's working folder")
    model = train_model("small")[0]
    runtime.load("small", sha256(model), model)
    assert runtime.pid is not None
    folder = os.readlink(f"/proc/{runtime.pid}/cwd")
    assert folder != str(tmp_path) and os.listdir(folder) == []
    assert os.stat(folder).st_mode & 0o077 == 0
    environ = Path(f"/proc/{runtime.pid}/environ").read_bytes()
    for secret in (b"the-service-token", b"the-cloud-key", b"the-ray-token", b"AWS_"):
        assert secret not in environ
    limits = Path(f"/proc/{runtime.pid}/limits").read_text()
    address_space = next(line for line in limits.splitlines() if "address space" in line)
    assert address_space.split()[3] == str(RUNTIME_BYTES)
    runtime.close()
    assert not Path(folder).parent.exists()


@pytest.mark.subprocess
def test_a_model_is_loaded_only_from_the_bytes_that_were_checked(runtime: ModelRuntime) -> None:
    model = train_model("small")[0]
    with pytest.raises(ModelFileError, match="its bytes are not the ones checked"):
        runtime.load("small", sha256(b"what job-add checked"), model)
    with pytest.raises(ModelFileError, match="graph initializer 'w'.*external data"):
        data = hostile_models.in_initializer()
        runtime.load("outside", sha256(data), data)
    assert runtime.loaded() == []


@pytest.mark.subprocess
def test_a_batch_past_the_memory_limit_fails_inside_the_runtime_which_goes_on(
        runtime: ModelRuntime) -> None:
    data, digest = hostile_models.hungry(), sha256(hostile_models.hungry())
    runtime.load("hungry", digest, data)
    before = resident_bytes(os.getpid())
    answers, _ = runtime.predict("hungry", digest, np.ones((4, 2), np.float32))
    assert answers.tolist() == [0, 0, 0, 0]
    with pytest.raises(ModelMemoryError) as refused:  # 4 GB asked, under 768 MiB allowed
        runtime.predict("hungry", digest, np.full((4, 2), 1000.0, np.float32))
    assert "out of memory on a batch of 4" in str(refused.value)
    assert runtime.starts == 1  # the same process answers on
    assert runtime.predict("hungry", digest, np.ones((2, 2), np.float32))[0].tolist() == [0, 0]
    assert resident_bytes(os.getpid()) < before + 64 * 2**20  # nothing of it landed here


@pytest.mark.subprocess
def test_loaded_models_stay_within_their_budget_least_recently_used_out_first() -> None:
    models = {size: train_model(size)[0] for size in ("small", "medium", "large")}
    digests = {size: sha256(data) for size, data in models.items()}
    budget = len(models["large"]) + len(models["small"]) + 1000
    with ModelRuntime(RUNTIME_BYTES, 20.0, session_bytes=budget) as runtime:
        for size in ("small", "medium"):
            runtime.load(size, digests[size], models[size])
        runtime.predict("small", digests["small"], np.zeros((1, 64), np.uint8))  # used last
        runtime.load("large", digests["large"], models["large"])
        assert runtime.loaded() == [digests["small"], digests["large"]]  # medium out first
        with pytest.raises(KeyError):
            runtime.predict("medium", digests["medium"], np.zeros((1, 64), np.uint8))
        runtime.drop([digests["large"]])
        assert runtime.loaded() == [digests["small"]]


@pytest.mark.subprocess
def test_a_runtime_that_dies_or_never_answers_is_said_so_and_started_again(
        runtime: ModelRuntime) -> None:
    data = hostile_models.spinning()
    digest = sha256(data)
    runtime.load("spinning", digest, data)
    assert runtime.pid is not None
    os.kill(runtime.pid, signal.SIGKILL)
    with pytest.raises(RuntimeDied, match="spinning: ONNX Runtime's process died "
                                          r"\(killed by signal 9; out of its 768 MiB"):
        runtime.predict("spinning", digest, np.zeros((2, 2), np.float32))
    runtime.timeout_s = 1.0
    with pytest.raises(KeyError):  # a new process: nothing loaded
        runtime.predict("spinning", digest, np.zeros((2, 2), np.float32))
    runtime.load("spinning", digest, data)
    assert runtime.predict("spinning", digest, np.zeros((2, 2), np.float32))[0].tolist() == [0, 0]
    pid = runtime.pid
    with pytest.raises(RuntimeTimedOut, match="did not load and run it within 1 s"):
        runtime.predict("spinning", digest, np.ones((2, 2), np.float32))
    assert pid is not None and not Path(f"/proc/{pid}").exists()
    assert runtime.starts == 2


@pytest.mark.subprocess
def test_the_check_refuses_a_model_whose_memory_grows_with_the_batch() -> None:
    data = hostile_models.hungry()
    assert check_model_bounded(data, "hungry", np.ones((2, 2), np.float32),
                               memory_bytes=RUNTIME_BYTES).shape == (2,)
    with pytest.raises(ModelMemoryError, match="hungry: ONNX Runtime ran out of memory"):
        check_model_bounded(data, "hungry", np.full((2, 2), 1000.0, np.float32),
                            memory_bytes=RUNTIME_BYTES)


PARENT = """
import sys
import numpy as np
from workloads.inference.runtime import ModelRuntime
from workloads.inference.models import sha256
from tests.helpers import hostile_models

data = hostile_models.spinning()
runtime = ModelRuntime(768 * 2**20, timeout_s=600.0)
runtime.load("spinning", sha256(data), data)
print(runtime.pid, runtime.folder, flush=True)
runtime.predict("spinning", sha256(data), np.ones((2, 2), np.float32))  # spins
"""


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ended(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.subprocess
def test_a_runtime_busy_in_a_batch_ends_with_its_parent_however_the_parent_ends() -> None:
    """A worker killed with its node (SIGKILL) while its model spins: the runtime, in a
    session of its own, used to spin on for ever, re-parented to init."""
    import subprocess
    import sys

    from tests.helpers.waiting import wait_until

    parent = subprocess.Popen([sys.executable, "-c", PARENT], cwd=Path(__file__).parents[2],
                              stdout=subprocess.PIPE, text=True)
    pid, folder = 0, ""
    try:
        assert parent.stdout is not None
        pid_text, folder = parent.stdout.readline().split()
        pid = int(pid_text)
        loaded_s = _cpu_s(pid)
        # in the model's batch: its CPU time grows a second past the load
        wait_until(lambda: _cpu_s(pid) > loaded_s + 1.0, 60.0, "the runtime spinning")
        parent.kill()
        parent.wait()
        wait_until(lambda: _ended(pid), 10.0, "the runtime ended with its parent")
        assert not Path(folder).exists()
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if pid and not _ended(pid) and folder.encode() in Path(
                f"/proc/{pid}/cmdline").read_bytes():  # still the runtime it started
            os.kill(pid, signal.SIGKILL)
