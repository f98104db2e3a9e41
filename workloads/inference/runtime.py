"""ONNX Runtime in a process of its own: the sandbox every model of the service runs in
(a worker's sub-jobs and job-add's check alike). A tenant's model is data, but the runtime
that interprets it is large native code; what it can reach is kept to the model itself:

- **memory**: the process's address space is limited (RLIMIT_AS, set by the process itself
  before it imports anything), so a model whose memory grows with the batch or with the
  queries' values fails there, inside its own process, with a MemoryError or ONNX
  Runtime's allocation failure, and never takes memory from the worker, the coordinator,
  Ray or the host. ONNX Runtime runs one thread, without its memory arena or memory
  patterns (workloads.inference.models.OnnxModel), so what a batch allocates goes back.
- **files**: its working folder is a new empty folder of its own (mode 0700, removed when
  it ends; HOME and TMPDIR are a second one beside it, where ONNX Runtime keeps its own
  cache): ONNX Runtime resolves a relative external-data location from the working folder,
  so a model that slipped past the external-data check (`models.external_tensors`, run here
  again on the very bytes loaded) finds nothing there.
- **secrets**: its environment is made from nothing (PATH, PYTHONPATH, the folder, one
  thread): no service token, no cloud credentials, no Ray address or token of the parent.
- **bytes**: a model is loaded only if its sha256 is the one job-add checked.
- **lifetime**: it ends, and its folder goes, when its parent does, however the parent
  ends (a lifeline pipe): a model busy in a batch is never left running by a worker
  that died with its node, or by a service taken down.

The parent talks to it over its stdin and stdout in frames: two big-endian 32-bit lengths
(a JSON header, a payload), the header, the payload (a model's bytes, a batch's raw array,
the answers as int64). No pickle either way. Every answer is awaited with a deadline; a
process that does not answer in time is killed, and one that died (a crash in the runtime,
or killed by the kernel) is reported as such with the end of what it wrote to stderr.

    python -m workloads.inference.runtime MEMORY_BYTES SESSION_BYTES LIFELINE_FD FOLDER
                                                                       (the child; not a CLI)
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import IO, Any

import numpy as np

from workloads.inference.models import (
    CHECK_MEMORY_BYTES,
    CHECK_TIMEOUT_S,
    ModelFileError,
    ModelMemoryError,
    Signature,
    sha256,
)

FRAME = struct.Struct(">II")
MAX_HEADER_BYTES = 1 << 20
MAX_PAYLOAD_BYTES = 1 << 31
STDERR_TAIL_BYTES = 600
START_TIMEOUT_S = 30.0
"""The process has imported ONNX Runtime and answers its first frame within this."""


@dataclass(frozen=True)
class MemoryBudget:
    """A worker's memory limit (`--worker-memory-mb`) and how it is spent: three quarters
    for its runtime process's address space (ONNX Runtime, the models it keeps loaded
    within a quarter of that, and the batch it runs), one quarter for the test sets the
    worker keeps. Job-add's check of a model runs under the same runtime limit."""

    limit_bytes: int

    @classmethod
    def of_mib(cls, mib: int) -> MemoryBudget:
        return cls(mib * 2**20)

    @property
    def runtime_bytes(self) -> int:
        return self.limit_bytes * 3 // 4

    @property
    def sessions_bytes(self) -> int:
        return self.runtime_bytes // 4

    @property
    def testsets_bytes(self) -> int:
        return self.limit_bytes // 4


class RuntimeDied(ModelFileError):
    """The runtime's process ended under a request (a crash in ONNX Runtime's native code,
    or killed for its memory): the request's model or batch is the likely cause."""


class RuntimeTimedOut(ModelFileError):
    """The runtime did not answer a request within its deadline; its process was killed."""


def sandbox_env(home: str) -> dict[str, str]:
    """The whole environment of a runtime process: what Python needs to find this project
    and its packages, a folder of its own as home and scratch, one thread. Nothing of the
    parent's (tokens, credentials, Ray's address) is passed on."""
    return {"PATH": os.defpath, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
            "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2"}


class ModelRuntime:
    """A runtime process, started on first use and again after it died: `load` a model
    (by the sha256 it was checked under), `predict` batches on it, `drop` models. At most
    `session_bytes` of models (their files' sizes) stay loaded, least recently used out
    first; `memory_bytes` is the process's whole address space."""

    def __init__(self, memory_bytes: int, timeout_s: float,
                 session_bytes: int | None = None,
                 start_timeout_s: float = START_TIMEOUT_S) -> None:
        self.memory_bytes = memory_bytes
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.session_bytes = memory_bytes // 4 if session_bytes is None else session_bytes
        self.process: subprocess.Popen[bytes] | None = None
        self.folder: str | None = None
        self.stderr: IO[bytes] | None = None
        self.lifeline: int | None = None
        """The write end of the pipe whose closing, however this process ends, ends the
        runtime's (it may be deep in a model's batch, reading nothing else)."""
        self.starts = 0

    def __enter__(self) -> ModelRuntime:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def _start(self) -> subprocess.Popen[bytes]:
        if self.process is not None and self.process.poll() is None:
            return self.process
        self.close()
        self.folder = tempfile.mkdtemp(prefix="spotburst-runtime-")
        work, home = os.path.join(self.folder, "work"), os.path.join(self.folder, "home")
        os.mkdir(work, 0o700)
        os.mkdir(home, 0o700)
        self.stderr = tempfile.TemporaryFile()
        lifeline, self.lifeline = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "workloads.inference.runtime", str(self.memory_bytes),
                 str(self.session_bytes), str(lifeline), self.folder], cwd=work,
                env=sandbox_env(home), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self.stderr, start_new_session=True, pass_fds=(lifeline,))
        finally:
            os.close(lifeline)
        self.starts += 1
        return self.process

    def close(self) -> None:
        """The process stopped (killed if it does not end on its stdin closing) and its
        folder removed."""
        process, self.process = self.process, None
        if process is not None:
            if process.stdin is not None:
                try:
                    process.stdin.close()
                except OSError:
                    pass
            try:
                process.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
        if self.stderr is not None:
            self.stderr.close()
            self.stderr = None
        if self.lifeline is not None:
            os.close(self.lifeline)
            self.lifeline = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def _request(self, name: str, header: dict[str, Any],
                 payload: bytes = b"") -> tuple[dict[str, Any], bytes]:
        """One request about model `name` and its answer; RuntimeDied or RuntimeTimedOut
        (the process killed) when there is none. A first request also waits for the
        process to start (start_timeout_s more)."""
        fresh = self.process is None or self.process.poll() is not None
        process = self._start()
        assert process.stdin is not None and process.stdout is not None
        deadline = time.monotonic() + self.timeout_s + (self.start_timeout_s if fresh else 0)
        data = json.dumps(header).encode()
        try:
            process.stdin.write(FRAME.pack(len(data), len(payload)) + data)
            process.stdin.write(payload)
            process.stdin.flush()
            head = _read_exactly(process.stdout, FRAME.size, deadline)
            header_size, payload_size = FRAME.unpack(head)
            if header_size > MAX_HEADER_BYTES or payload_size > MAX_PAYLOAD_BYTES:
                raise BrokenPipeError("a frame larger than the protocol allows")
            answer = json.loads(_read_exactly(process.stdout, header_size, deadline))
            body = _read_exactly(process.stdout, payload_size, deadline)
        except TimeoutError:
            self._kill()
            raise RuntimeTimedOut(f"{name}: ONNX Runtime did not load and run it within "
                                  f"{self.timeout_s:g} s") from None
        except (OSError, ValueError, EOFError):
            raise self._died(name) from None
        if not isinstance(answer, dict):
            raise self._died(name)
        return answer, body

    def interrupt(self) -> None:
        """Kill the process from another thread: the request in flight ends as RuntimeDied,
        and the owner's next request starts a new process."""
        process = self.process
        if process is not None and process.returncode is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:  # it ended meanwhile
                pass

    def _kill(self) -> None:
        self.interrupt()
        self.close()

    def _died(self, name: str) -> RuntimeDied:
        """What ended the process, with the end of its stderr; the process is cleaned up."""
        process = self.process
        code = process.wait(timeout=5.0) if process is not None else None
        said = ""
        if self.stderr is not None:
            self.stderr.seek(0, os.SEEK_END)
            self.stderr.seek(max(0, self.stderr.tell() - STDERR_TAIL_BYTES))
            said = " ".join(self.stderr.read().decode(errors="replace").split())[-300:]
        self.close()
        how = (f"killed by signal {-code}" if code is not None and code < 0
               else f"exit code {code}")
        return RuntimeDied(f"{name}: ONNX Runtime's process died ({how}; out of its "
                           f"{self.memory_bytes // 2**20} MiB of memory, or a crash"
                           f"{': ' + said if said else ''})")

    def _answer(self, answer: dict[str, Any]) -> None:
        if answer.get("ok"):
            return
        error = str(answer.get("error"))
        raise ModelMemoryError(error) if answer.get("memory") else ModelFileError(error)

    def load(self, name: str, digest: str, data: bytes) -> Signature:
        """The model loaded in the process (checked there, self-contained among others, and
        refused unless its bytes have sha256 `digest`): its signature."""
        answer, _ = self._request(name, {"op": "load", "name": name, "digest": digest}, data)
        self._answer(answer)
        signature = answer["signature"]
        return Signature(signature["input"], signature["dtype"], tuple(signature["shape"]),
                         signature["output"])

    def loaded(self) -> list[str]:
        """The digests of the models loaded now (none when the process is not running)."""
        if self.process is None or self.process.poll() is not None:
            return []
        answer, _ = self._request("stats", {"op": "stats"})
        return list(answer["loaded"])

    def predict(self, name: str, digest: str,
                batch: np.ndarray) -> tuple[np.ndarray, float]:
        """One answer per row of `batch` by the model `name` of `digest` (loaded first), and
        the seconds ONNX Runtime took. KeyError when that model is not loaded (any more)."""
        batch = np.ascontiguousarray(batch)
        answer, body = self._request(name, {"op": "run", "digest": digest, "name": name,
                                            "dtype": batch.dtype.str,
                                            "shape": list(batch.shape)}, batch.tobytes())
        if answer.get("missing"):
            raise KeyError(digest)
        self._answer(answer)
        return np.frombuffer(body, np.int64), float(answer["compute_s"])

    def drop(self, digests: list[str]) -> None:
        if self.process is not None and self.process.poll() is None and digests:
            self._answer(self._request("drop", {"op": "drop", "digests": digests})[0])

    def memory(self) -> int:
        """The process's resident memory in bytes (0 when it is not running)."""
        if self.process is None or self.process.poll() is not None:
            return 0
        return resident_bytes(self.process.pid)


def check_model_bounded(data: bytes, name: str, probe: np.ndarray,
                        timeout_s: float = CHECK_TIMEOUT_S,
                        memory_bytes: int = CHECK_MEMORY_BYTES) -> Signature:
    """The model loaded by ONNX Runtime and, when `probe` (test set rows) fits its input,
    run on it, in the sandbox every model runs in (workloads.inference.runtime: a process of
    its own with `memory_bytes` of address space, an empty working folder and no secrets in
    its environment) within `timeout_s`: ModelFileError naming what fails, MemoryError's
    kin ModelMemoryError when the model outgrew the memory. The caller is never at risk."""
    with ModelRuntime(memory_bytes, timeout_s, start_timeout_s=0.0) as runtime:
        signature = runtime.load(name, sha256(data), data)
        if len(probe) and signature.accepts(probe.shape, probe.dtype) is None:
            runtime.predict(name, sha256(data), probe)
    return signature


def resident_bytes(pid: int) -> int:
    """A process's resident set (VmRSS), 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _read_exactly(stream: IO[bytes], size: int, deadline: float) -> bytes:
    """`size` bytes from the pipe by `deadline` (TimeoutError), EOFError at its end."""
    chunks: list[bytes] = []
    missing = size
    descriptor = stream.fileno()
    while missing:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([descriptor], [], [], remaining)[0]:
            raise TimeoutError
        chunk = os.read(descriptor, min(missing, 1 << 20))
        if not chunk:
            raise EOFError("the runtime's process closed its output")
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)


# --- the runtime's process -----------------------------------------------------------------


def _limit_memory(memory_bytes: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _read_frame(stream: IO[bytes]) -> tuple[dict[str, Any], bytes] | None:
    head = stream.read(FRAME.size)
    if len(head) < FRAME.size:
        return None
    header_size, payload_size = FRAME.unpack(head)
    header = json.loads(stream.read(header_size))
    payload = stream.read(payload_size)
    if len(payload) != payload_size:
        return None
    return header, payload


def _write_frame(stream: IO[bytes], header: dict[str, Any], payload: bytes = b"") -> None:
    data = json.dumps(header).encode()
    stream.write(FRAME.pack(len(data), len(payload)) + data + payload)
    stream.flush()


def _end_with_parent(lifeline: int, folder: str) -> None:
    """A thread that ends this process, and removes its folder, once the parent's end of the
    lifeline closes: when the parent stops it, and when the parent dies (a preempted node's
    worker, a killed service) while a model's batch keeps this process busy. ONNX Runtime
    lets go of the GIL while it runs a batch, so the thread runs."""

    def watch() -> None:
        while os.read(lifeline, 1):
            pass
        shutil.rmtree(folder, ignore_errors=True)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="lifeline").start()


def serve(memory_bytes: int, session_bytes: int, lifeline: int, folder: str) -> None:
    """The runtime's process: answer frames on stdin until it closes, or its parent's end of
    the lifeline does."""
    _limit_memory(memory_bytes)
    _end_with_parent(lifeline, folder)
    from workloads.inference.models import OnnxModel

    sessions: OrderedDict[str, tuple[OnnxModel, int]] = OrderedDict()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames on the parent's pipe
    while (frame := _read_frame(stdin)) is not None:
        header, payload = frame
        answer: dict[str, Any] = {"ok": True}
        body = b""
        try:
            if header["op"] == "load":
                if sha256(payload) != header["digest"]:
                    raise ModelFileError(f"{header['name']}: its bytes are not the ones "
                                         "checked (changed in the store since job-add)")
                if header["digest"] not in sessions:
                    model = OnnxModel(payload, header["name"])
                    sessions[header["digest"]] = (model, len(payload))
                    while (len(sessions) > 1 and sum(size for _, size in sessions.values())
                           > session_bytes):
                        sessions.popitem(last=False)
                sessions.move_to_end(header["digest"])
                answer["signature"] = asdict(sessions[header["digest"]][0].signature)
            elif header["op"] == "run":
                if header["digest"] not in sessions:
                    answer = {"ok": False, "missing": True}
                else:
                    sessions.move_to_end(header["digest"])
                    batch = np.frombuffer(payload, np.dtype(header["dtype"])).reshape(
                        header["shape"])
                    began = time.perf_counter()
                    answers = sessions[header["digest"]][0].predict(batch)
                    answer["compute_s"] = time.perf_counter() - began
                    body = answers.astype(np.int64).tobytes()
            elif header["op"] == "drop":
                for digest in header["digests"]:
                    sessions.pop(digest, None)
            elif header["op"] == "stats":
                answer["loaded"] = list(sessions)
            else:
                answer = {"ok": False, "error": f"no operation {header['op']!r}"}
        except ModelMemoryError as error:
            answer = {"ok": False, "memory": True, "error": str(error)}
        except ModelFileError as error:
            answer = {"ok": False, "error": str(error)}
        except MemoryError:
            answer = {"ok": False, "memory": True, "error": f"out of the {memory_bytes // 2**20}"
                      " MiB of memory ONNX Runtime's process may take"}
        except Exception as error:  # what a model's output can make of the answer's code
            answer = {"ok": False, "error": f"{header.get('name', 'the model')}: its answer "
                      f"cannot be read ({type(error).__name__}: {error})"[:500]}
        _write_frame(stdout, answer, body)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
