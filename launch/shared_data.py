"""`invoke data-put`, `data-ls`, `data-get`, `data-rm`: datasets staged once in the shared
folder every node of a spot lab or of a stack's spot cluster sees (SPOTBURST_SHARED).

Both targets run the same small program (STORE_PROGRAM) beside the folder: on the lab it is
this machine's Python; on a stack it is the Python of a RayCluster's head pod, through
`kubectl exec` (the folder is the stack's EFS file system, at /mnt/shared in every pod). A
file goes through this process in chunks, so a large one shows its progress; it lands under
a hidden partial name and takes its own name only once whole, so a failed or interrupted
put leaves nothing behind. Errors are one line: a bad name, a missing file, no space left.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from vocab.errors import RunFailed, UserError
from vocab.shared_data import SHARED_MOUNT_PATH

CHUNK = 1 << 20
MIN_RATE = 1 << 20
"""Bytes per second a transfer may not fall below on average (then it is ended)."""
COMMAND_TIMEOUT_S = 60.0
"""Of a command that moves no data (listing, removing), and added to every transfer's."""
PROGRESS_EVERY_S = 1.0
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]{0,254}")
HEAD_CONTAINER = "ray-head"

STORE_PROGRAM = r"""
import errno, json, os, shutil, sys
op, root = sys.argv[1], sys.argv[2]
def done(**answer):
    sys.stdout.write(json.dumps(answer) + "\n"); sys.exit(0)
def fail(kind, detail):
    sys.stderr.write(json.dumps({"error": kind, "detail": detail}) + "\n"); sys.exit(3)
def size_of(entry):
    if not entry.is_dir(follow_symlinks=False):
        return entry.stat(follow_symlinks=False).st_size
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(entry.path)
               for f in fs)
if not os.path.isdir(root):
    fail("no-folder", root)
if op == "ls":
    entries = [{"name": e.name, "bytes": size_of(e), "folder": e.is_dir()}
               for e in sorted(os.scandir(root), key=lambda e: e.name)
               if not e.name.startswith(".")]
    done(entries=entries, free=shutil.disk_usage(root).free, root=root)
path = os.path.join(root, sys.argv[3])
if op == "put":
    size, partial = int(sys.argv[4]), os.path.join(root, "." + sys.argv[3] + ".partial")
    free = shutil.disk_usage(root).free
    if size > free:
        fail("space", "%d bytes to write, %d free" % (size, free))
    try:
        with open(partial, "wb") as out:  # exactly size bytes: an exec may never pass on EOF
            left = size
            while left:
                chunk = sys.stdin.buffer.read(min(left, 1 << 20))
                if not chunk:
                    break
                out.write(chunk); left -= len(chunk)
            out.flush(); os.fsync(out.fileno())
        got = os.path.getsize(partial)
        if got != size:
            os.remove(partial); fail("short", "%d of %d bytes arrived" % (got, size))
        os.replace(partial, path)
    except OSError as error:
        if os.path.lexists(partial):
            os.remove(partial)
        fail("space" if error.errno in (errno.ENOSPC, errno.EDQUOT) else "os", str(error))
    done(name=sys.argv[3], bytes=size)
if not os.path.lexists(path):
    fail("missing", sys.argv[3])
if op == "stat":
    done(bytes=os.path.getsize(path), folder=os.path.isdir(path))
if op == "cat":
    with open(path, "rb") as source:
        shutil.copyfileobj(source, sys.stdout.buffer, 1 << 20)
    sys.exit(0)
if op == "rm":
    folder = os.path.isdir(path) and not os.path.islink(path)
    shutil.rmtree(path) if folder else os.remove(path)
    done(name=sys.argv[3], folder=folder)
fail("os", "unknown operation " + op)
"""


class DataError(UserError, ValueError):
    """A bad name, a missing file, no space left: one line naming what is wrong."""


class DataTransferFailed(RunFailed, RuntimeError):
    """The folder's side failed or did not answer in time."""


Progress = Callable[[str], None]


def print_progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def check_name(name: str) -> str:
    """A name in the shared folder: one plain file or folder name, nothing that climbs out
    of the folder (`..`, `/`) or hides (a leading `.`: partial files are hidden)."""
    if "/" in name or "\\" in name:
        raise DataError(f"NAME: {name!r} holds a path separator; give a plain name such as "
                        "digits.npz (data-ls lists the shared folder's top level only)")
    if ".." in name:
        raise DataError(f"NAME: {name!r} holds '..'; give a plain name such as digits.npz")
    if not NAME.fullmatch(name):
        raise DataError(f"NAME: {name!r} is not allowed; use letters, digits and . _ + - "
                        "(not first: . + -), at most 255")
    return name


@dataclass(frozen=True)
class SharedFolder:
    """Where STORE_PROGRAM runs: `prefix` + [python, -c, program, ...]."""

    where: str
    """How errors name it: "spot lab 3fa2c1's shared folder /tmp/...", "stack dev's EFS"."""
    root: str
    prefix: tuple[str, ...] = ()
    python: str = sys.executable

    def argv(self, op: str, *args: str) -> list[str]:
        return [*self.prefix, self.python, "-c", STORE_PROGRAM, op, self.root, *args]

    def ask(self, op: str, *args: str) -> dict[str, Any]:
        """Run one operation that moves no data; its answer."""
        try:
            done = subprocess.run(self.argv(op, *args), capture_output=True,
                                  timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise DataTransferFailed(f"{self.where}: no answer to {op} within "
                                     f"{COMMAND_TIMEOUT_S:g} s") from None
        self._check(done.returncode, done.stderr, op, args)
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer

    def _check(self, returncode: int, stderr: bytes, op: str, args: tuple[str, ...]) -> None:
        if returncode == 0:
            return
        lines = stderr.decode(errors="replace").strip().splitlines()
        try:
            failure = json.loads(lines[-1]) if lines else {}
        except json.JSONDecodeError:
            failure = {}
        kind, detail = failure.get("error"), failure.get("detail", "")
        name = args[0] if args else ""
        if kind == "missing":
            raise DataError(f"NAME: no {name!r} in {self.where} (data-ls lists it)")
        if kind == "space":
            raise DataError(f"no space left in {self.where} for {name!r}: {detail}")
        if kind == "no-folder":
            raise DataError(f"{self.where} does not exist")
        gist = detail or " ".join(" ".join(lines).split()) or f"exit code {returncode}"
        raise DataTransferFailed(f"{self.where}: {op} {name} failed: {gist}")


def _deadline(size: int) -> float:
    return COMMAND_TIMEOUT_S + size / MIN_RATE


def _moved(done: int, total: int, started: float, verb: str, name: str) -> str:
    mib = 1 << 20
    rate = done / max(time.monotonic() - started, 1e-6) / mib
    share = f" ({100 * done / total:.0f}%)" if total else ""
    return f"{verb} {name}: {done / mib:.1f} of {total / mib:.1f} MiB{share}, {rate:.1f} MiB/s"


def _pump(source: IO[bytes], sink: IO[bytes], total: int, deadline: float,
          report: Callable[[int], None], what: str) -> int:
    done = 0
    last = time.monotonic()
    while chunk := source.read(CHUNK):
        sink.write(chunk)
        done += len(chunk)
        now = time.monotonic()
        if now > deadline:
            raise DataTransferFailed(f"{what}: slower than {MIN_RATE >> 20} MiB/s; ended")
        if now - last >= PROGRESS_EVERY_S:
            report(done)
            last = now
    return done


@contextmanager
def _process(argv: list[str], **pipes: Any) -> Iterator[subprocess.Popen[bytes]]:
    """A process of ours that is gone when the block ends, however it ends."""
    process = subprocess.Popen(argv, **pipes)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def put(folder: SharedFolder, local: Path, name: str | None,
        progress: Progress = print_progress) -> str:
    if not local.is_file():
        what = "a folder; put its files one by one or as one archive" if local.is_dir() \
            else "no such file"
        raise DataError(f"LOCAL: {local}: {what}")
    name = check_name(name if name is not None else local.name)
    size = local.stat().st_size
    started = time.monotonic()
    deadline = started + _deadline(size)
    with local.open("rb") as source, _process(folder.argv("put", name, str(size)),
                                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE) as process:
        assert process.stdin is not None and process.stderr is not None
        try:
            _pump(source, process.stdin, size, deadline,
                  lambda done: progress(_moved(done, size, started, "put", name)),
                  f"{folder.where}: put {name}")
        except BrokenPipeError:
            pass  # the other side ended early: its answer says why
        try:
            process.stdin.close()
        except BrokenPipeError:
            pass
        try:
            # its answer is one short line: it fits the pipe, so waiting first cannot block
            process.wait(timeout=max(deadline - time.monotonic(), 1.0))
        except subprocess.TimeoutExpired:
            raise DataTransferFailed(f"{folder.where}: put {name}: no answer in time") from None
        folder._check(process.returncode, process.stderr.read(), "put", (name,))
    return f"put {local} as {name} ({size} bytes) in {folder.where}"


def get(folder: SharedFolder, name: str, local: Path, progress: Progress = print_progress) -> str:
    check_name(name)
    if local.is_dir():
        local = local / name
    if not local.parent.is_dir():
        raise DataError(f"LOCAL: {local.parent} is not a folder")
    info = folder.ask("stat", name)
    if info["folder"]:
        raise DataError(f"NAME: {name!r} in {folder.where} is a folder; get its files")
    size = int(info["bytes"])
    started = time.monotonic()
    deadline = started + _deadline(size)
    partial = local.with_name(f".{local.name}.partial")
    try:
        with partial.open("wb") as sink, _process(folder.argv("cat", name),
                                                  stdin=subprocess.DEVNULL,
                                                  stdout=subprocess.PIPE,
                                                  stderr=subprocess.PIPE) as process:
            assert process.stdout is not None and process.stderr is not None
            got = _pump(process.stdout, sink, size, deadline,
                        lambda done: progress(_moved(done, size, started, "get", name)),
                        f"{folder.where}: get {name}")
            process.wait(timeout=max(deadline - time.monotonic(), 1.0))
            folder._check(process.returncode, process.stderr.read(), "get", (name,))
        if got != size:
            raise DataTransferFailed(f"{folder.where}: get {name}: {got} of {size} bytes came")
        partial.replace(local)
    except OSError as error:
        raise DataError(f"LOCAL: {local}: {error.strerror or error}") from None
    finally:
        partial.unlink(missing_ok=True)
    return f"got {name} ({size} bytes) from {folder.where} into {local}"


def listing(folder: SharedFolder) -> dict[str, Any]:
    return folder.ask("ls")


def format_listing(folder: SharedFolder, answer: dict[str, Any]) -> str:
    lines = [f"{folder.where} ({answer['root']}):"]
    for entry in answer["entries"]:
        kind = "folder" if entry["folder"] else "file"
        lines.append(f"  {entry['name']:<32} {entry['bytes']:>14} bytes  {kind}")
    if not answer["entries"]:
        lines.append("  (empty)")
    lines.append(f"  {answer['free'] / (1 << 30):.1f} GiB free")
    return "\n".join(lines)


def remove(folder: SharedFolder, name: str) -> str:
    answer = folder.ask("rm", check_name(name))
    return f"removed {'folder' if answer['folder'] else 'file'} {name} from {folder.where}"


# --- the targets ------------------------------------------------------------------------------


def lab_folder(lab_id: str | None) -> SharedFolder:
    """The shared folder of a recorded spot lab (the only one without `lab_id`)."""
    from spotlab.state import load_state

    state = load_state(lab_id, prefer_live=True)
    shared = state.get("shared_dir")
    if not shared:
        raise DataError(f"--lab: spot lab {state['lab_id']} has no shared folder (it was "
                        "started before labs had one); start a new lab")
    return SharedFolder(f"spot lab {state['lab_id']}'s shared folder", str(shared))


@contextmanager
def stack_folder(stack: str, experiment: str | None) -> Iterator[SharedFolder]:
    """The stack's shared file system, through the head pod of one of its RayClusters
    (`experiment`, or the first deployed): the kubeconfig sits in a private file meanwhile."""
    from launch import pulumi_cli
    from launch.port_forward import private_file
    from stacks import outputs as names
    from stacks.config_types import RAY_ON_EKS
    from stacks.outputs import read_ray_cluster_outputs

    outputs = pulumi_cli.stack_outputs(stack, show_secrets=True)
    if not outputs.get(names.SHARED_FILE_SYSTEM):
        raise DataError(f"--stack: stack {stack} has no shared file system "
                        "(spotburst:spotCluster.sharedStorage is none, or it is not deployed)")
    deployed = [e for e in outputs.get(names.EXPERIMENTS, []) if e in RAY_ON_EKS]
    chosen = experiment or (deployed[0] if deployed else None)
    if chosen not in deployed:
        raise DataError(f"--experiment: {chosen!r} has no RayCluster on stack {stack} "
                        f"(deployed: {', '.join(deployed) or 'none'})")
    assert chosen is not None
    cluster = read_ray_cluster_outputs(outputs, stack, chosen)
    with private_file(cluster.kubeconfig, ".kubeconfig") as config_file:
        kubectl = ("kubectl", "--kubeconfig", str(config_file), "-n", cluster.namespace)
        pod = _head_pod(kubectl, outputs.get(names.raycluster_name(chosen), chosen))
        yield SharedFolder(f"stack {stack}'s shared file system", SHARED_MOUNT_PATH,
                           prefix=(*kubectl, "exec", "-i", pod, "-c", HEAD_CONTAINER, "--"),
                           python="python")


def _head_pod(kubectl: tuple[str, ...], raycluster: str) -> str:
    command = [*kubectl, "get", "pods", "-l", f"ray.io/cluster={raycluster},"
               "ray.io/node-type=head", "--field-selector", "status.phase=Running",
               "-o", "jsonpath={.items[*].metadata.name}", "--request-timeout=30s"]
    try:
        found = subprocess.run(command, capture_output=True, text=True,
                               timeout=COMMAND_TIMEOUT_S)
    except FileNotFoundError:
        raise DataError("kubectl is not installed (needed for --stack)") from None
    except subprocess.TimeoutExpired:
        raise DataTransferFailed("kubectl get pods: no answer within "
                                 f"{COMMAND_TIMEOUT_S:g} s") from None
    if found.returncode != 0:
        raise DataTransferFailed(f"kubectl get pods: {' '.join(found.stderr.split())}")
    names = found.stdout.split()
    if not names:
        raise DataTransferFailed(f"RayCluster {raycluster} has no running head pod")
    return names[0]
