"""The one process helper: start a process, wait for its ready line, stop what was started.

Used by the labs (Ray nodes, moto_server), the launcher's tunnels (kubectl port-forward,
the SSM plugin) and the tests alike. A process is stopped only when it is ours, provably: a
live child whose handle the caller holds (`stop`, `stop_children`), or a process that
carries the owner's marker in its environment (`stop_marked`; MARKER_ENV). A PID read from a
file is never enough: by now it may name anyone's process. Never by name, never with Ray's
stop-every-Ray-process command.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from vocab.errors import RunFailed

POLL_S = 0.05
STALL_CHECK_S = 0.5


class ProcessNotReady(RunFailed, RuntimeError):
    """The process ended, or did not print its ready line in time; carries its output's tail."""


def spawn(
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    log_path: Path | None = None,
    cwd: Path | None = None,
    new_session: bool = True,
    merge_stderr: bool = False,
) -> subprocess.Popen[str]:
    """Start `argv`. Output goes to `log_path` (appended) or, without one, to a pipe that
    `wait_for_line` reads (stderr too with merge_stderr, else a pipe of its own). `env` is
    added to this process's environment. In a new session by default, so a terminal's
    Ctrl-C reaches only the owner, who then stops it by PID."""
    full_env = {**os.environ, **(env or {})}
    if MARKER_ENV in full_env:
        full_env.update(KEEP_ENVIRON_READABLE)
    if log_path is None:
        return subprocess.Popen(
            argv,
            env=full_env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            text=True,
            start_new_session=new_session,
        )
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a") as log:
        return subprocess.Popen(
            argv,
            env=full_env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=new_session,
        )


@contextmanager
def killed_after(
    process: subprocess.Popen[str], timeout_s: float, stalled: Callable[[], bool] | None = None
) -> Iterator[threading.Event]:
    """Kill `process` if the block is still running `timeout_s` from now, or earlier once
    `stalled()` says so (checked every STALL_CHECK_S), with the processes it started when it
    leads a session of its own, as `spawn` starts it (one of them may hold its output pipe
    open); yields an event that is set when it was killed so."""
    given_up = threading.Event()
    done = threading.Event()
    deadline = time.monotonic() + timeout_s

    def watch() -> None:
        while not done.wait(min(STALL_CHECK_S, max(deadline - time.monotonic(), 0.0))):
            if time.monotonic() >= deadline or (stalled is not None and stalled()):
                given_up.set()
                try:
                    if os.getpgid(process.pid) == process.pid:
                        os.killpg(process.pid, signal.SIGKILL)
                    else:
                        process.kill()
                except ProcessLookupError:
                    pass
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield given_up
    finally:
        done.set()


def wait_for_line(
    process: subprocess.Popen[str],
    ready: str | Callable[[str], bool],
    *,
    timeout_s: float,
    name: str,
    drain: bool = True,
) -> str:
    """Read the process's stdout pipe until a line contains `ready` (or satisfies it);
    return that line. The rest of its output keeps being drained in the background, or the
    process would block once the pipe fills; with drain=False the caller reads it instead,
    from `process.stdout` (not `communicate()`, which would miss lines already read ahead
    into its buffer). Raises ProcessNotReady with its
    stderr if it exits first or stays silent past `timeout_s` (it is then stopped)."""
    if process.stdout is None:
        raise ValueError(f"{name}: wait_for_line needs a process spawned without log_path")
    matches = ready if callable(ready) else (lambda line: ready in line)
    with killed_after(process, timeout_s) as timed_out:
        for line in process.stdout:
            if matches(line):
                if not drain:
                    return line
                threading.Thread(target=process.stdout.read, daemon=True).start()
                if process.stderr is not None:
                    threading.Thread(target=process.stderr.read, daemon=True).start()
                return line
    process.wait()
    error = process.stderr.read().strip() if process.stderr is not None else ""
    why = (
        f"not ready within {timeout_s:g} s"
        if timed_out.is_set()
        else f"exited {process.returncode}"
    )
    raise ProcessNotReady(f"{name} {why}: {error[-800:]}".rstrip(": "))


def wait_for_file_line(
    process: subprocess.Popen[str],
    log_path: Path,
    ready: str,
    *,
    timeout_s: float,
    name: str,
) -> str:
    """Like wait_for_line, for a process whose output goes to `log_path`."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = log_path.read_text(errors="replace") if log_path.exists() else ""
        for line in text.splitlines():
            if ready in line:
                return line
        if process.poll() is not None:
            raise ProcessNotReady(f"{name} exited {process.returncode}: {log_tail(log_path)}")
        if time.monotonic() > deadline:
            stop(process)
            raise ProcessNotReady(f"{name} not ready within {timeout_s:g} s: {log_tail(log_path)}")
        time.sleep(POLL_S)


def follow(
    argv: list[str],
    on_line: Callable[[str], None],
    *,
    timeout_s: float,
    name: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    stalled: Callable[[], bool] | None = None,
) -> tuple[int, list[str]]:
    """Run `argv` to its end (stderr merged into stdout), calling `on_line` with each output
    line, newline stripped, as it comes; return (exit code, lines). Past `timeout_s` the
    process is killed, silent or not, and TimeoutError carries its last lines; once
    `stalled()` says so it is killed too, and its exit code returned (the caller says why);
    it is stopped by PID on any way out."""
    process = spawn(argv, env=env, cwd=cwd, merge_stderr=True)
    assert process.stdout is not None
    lines: list[str] = []
    try:
        with killed_after(process, timeout_s, stalled) as timed_out:
            for raw in process.stdout:
                line = raw.rstrip("\n")
                lines.append(line)
                on_line(line)
            process.wait()
    finally:
        stop(process)
    if timed_out.is_set() and not (stalled is not None and stalled()):
        tail = "\n".join(lines[-60:])
        raise TimeoutError(f"{name} did not end within {timeout_s:g} s; its last lines:\n{tail}")
    return process.returncode, lines


GIST_CHARS = 160
_TELLING = re.compile(r"(\b\w*(Error|Exception)\b|Check failed|timed out|[Ff]ailed|[Ff]atal"
                      r"|[Kk]illed|Aborted|No space|refused)")


def log_gist(log_path: Path) -> str:
    """What a process's log says went wrong, in a few words: its last line that names an
    error (an exception's message, a failed check, a timeout), else its last line; at most
    GIST_CHARS characters, "" when the log is empty or unreadable."""
    try:
        lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line and not line.startswith(("File \"", "^", "~"))]
    telling = [line for line in lines if _TELLING.search(line)]
    gist = (telling or lines or [""])[-1]
    return gist if len(gist) <= GIST_CHARS else gist[:GIST_CHARS - 3] + "..."


def log_tail(log_path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def is_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone; our own children are reaped)."""
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    except ChildProcessError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def start_time(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot), None if it is gone: with the PID, names
    one process for good (a PID alone may be reused)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


MARKER_ENV = "SPOTBURST_LAB"
"""The environment variable that marks a lab's processes: `<lab id>` or `<lab id>/<part>`
(Ray passes a node's environment on to its daemons and workers)."""


KEEP_ENVIRON_READABLE = {"SPT_NOENV": "1"}
"""For a marked process: Ray's processes (its agents, its workers) name themselves with
setproctitle, which by default writes the title over the memory that /proc/PID/environ
shows, so the marker of such a process could be read as zeros (found in a lab whose head's
agents were left running). SPT_NOENV keeps the environment and limits a title to the
length of the process's own argv, which Ray's long command lines leave room for."""


def marker_of(pid: int) -> str | None:
    """The value of MARKER_ENV in `pid`'s environment; None if it has none or is gone."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    prefix = f"{MARKER_ENV}=".encode()
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix):].decode(errors="replace")
    return None


def carries_marker(pid: int, owner: str) -> bool:
    """`pid` carries `owner`'s marker: MARKER_ENV is `owner` or `owner/<part>`."""
    value = marker_of(pid)
    return value is not None and (value == owner or value.startswith(owner + "/"))


def marked_pids(owner: str) -> set[int]:
    """Live processes that carry `owner`'s marker, but never this one (a lab's own process,
    a job's driver say, may remove its lab without stopping itself)."""
    return {int(entry.name) for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and int(entry.name) != os.getpid()
            and carries_marker(int(entry.name), owner)}


@dataclass(frozen=True)
class Stopped:
    """What `stop_marked` did with each PID it was given."""

    stopped: frozenset[int]
    """Carried the marker, were signalled and are gone."""
    left: frozenset[int]
    """Carried the marker and still run after SIGKILL."""
    not_ours: frozenset[int]
    """Alive without the marker: never signalled (a recorded PID that names another process
    by now)."""


def stop_marked(pids: Iterable[int], owner: str, grace_s: float = 10.0,
                kill_wait_s: float = 5.0) -> Stopped:
    """Stop the processes among `pids` that carry `owner`'s marker (see carries_marker):
    SIGTERM, `grace_s` to end, then SIGKILL. A PID without the marker is never signalled, and
    the marker is read after a pidfd is held, so a PID reused between the check and the
    signal cannot be hit: the signal goes through the pidfd, to the process checked or to
    none. PIDs of processes already gone are in none of the returned sets."""
    handles: dict[int, int] = {}
    not_ours = set()
    try:
        for pid in set(pids):
            try:
                handle = os.pidfd_open(pid)
            except (ProcessLookupError, OSError):
                continue  # gone
            if _ended(handle):
                os.close(handle)
            elif carries_marker(pid, owner):
                handles[pid] = handle
            else:
                os.close(handle)
                not_ours.add(pid)
        remaining = set(handles)
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, kill_wait_s)):
            for pid in remaining:
                try:
                    signal.pidfd_send_signal(handles[pid], sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait_s
            while True:
                remaining = {pid for pid in remaining if not _ended(handles[pid])}
                if not remaining or time.monotonic() >= deadline:
                    break
                time.sleep(POLL_S)
            if not remaining:
                break
        return Stopped(stopped=frozenset(set(handles) - remaining), left=frozenset(remaining),
                       not_ours=frozenset(not_ours))
    finally:
        for handle in handles.values():
            os.close(handle)


STOP_ROUNDS = 3


def stop_all_marked(owner: str, also: Iterable[int] = (), grace_s: float = 10.0,
                    kill_wait_s: float = 5.0) -> Stopped:
    """Stop every process that carries `owner`'s marker (and those of `also` that carry it),
    looking again after each round: a node being stopped can still start a process (a Ray
    worker, an agent) after the first look, which a single list of PIDs would miss. At most
    STOP_ROUNDS rounds; what the rounds stopped, left and found not ours, together."""
    stopped: set[int] = set()
    left: set[int] = set()
    not_ours: set[int] = set()
    pids = set(also) | marked_pids(owner)
    for _ in range(STOP_ROUNDS):
        result = stop_marked(pids, owner, grace_s=grace_s, kill_wait_s=kill_wait_s)
        stopped |= result.stopped
        left = set(result.left)
        not_ours |= result.not_ours
        pids = marked_pids(owner)
        if not pids - left:
            break
    return Stopped(stopped=frozenset(stopped - left), left=frozenset(left),
                   not_ours=frozenset(not_ours))


def _ended(handle: int) -> bool:
    """The process behind the pidfd has exited (a child of ours is left for its owner's
    handle to reap, which keeps its exit status)."""
    return bool(select.select([handle], [], [], 0)[0])


def stop_children(processes: Iterable[subprocess.Popen[str]], grace_s: float = 10.0,
                  kill_wait_s: float = 5.0) -> None:
    """Stop processes started here, by their handles, together: SIGTERM to all, `grace_s`
    for all of them to end, then SIGKILL to the rest; reaps them."""
    running = [process for process in processes if process.poll() is None]
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, kill_wait_s)):
        for process in running:
            try:
                process.send_signal(sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while True:
            running = [process for process in running if process.poll() is None]
            if not running or time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
        if not running:
            return


def stop(process: subprocess.Popen[str] | subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """Stop one process started here: TERM, then KILL after `grace_s`; reaps it."""
    if process.poll() is not None:
        return
    try:
        process.terminate()
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    except ProcessLookupError:
        process.wait()


@contextmanager
def running(
    argv: list[str],
    ready: str | Callable[[str], bool],
    *,
    timeout_s: float,
    name: str,
    env: dict[str, str] | None = None,
    grace_s: float = 10.0,
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Run `argv` until it prints its ready line; yield (process, that line); then stop it.
    A missing executable raises FileNotFoundError as usual."""
    process = spawn(argv, env=env)
    try:
        line = wait_for_line(process, ready, timeout_s=timeout_s, name=name)
        yield process, line
    finally:
        stop(process, grace_s=grace_s)


@contextmanager
def sigterm_raises_interrupt() -> Iterator[None]:
    """In the main thread, SIGTERM raises KeyboardInterrupt: an owner stopped by SIGTERM
    cleans up as on Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def interrupts_ignored() -> Iterator[None]:
    """Ctrl-C and SIGTERM are ignored inside (main thread): a teardown runs to its end."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT,
                                                                     signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
