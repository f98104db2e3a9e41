"""The one process helper: start a process, wait for its ready line, stop it by PID.

Used by the labs (Ray nodes, moto_server), the launcher's tunnels (kubectl port-forward,
the SSM plugin) and the tests alike. Only processes that were started here are stopped,
always by PID: never by name, never with Ray's stop-every-Ray-process command.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from vocab.errors import RunFailed

POLL_S = 0.05


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
def killed_after(process: subprocess.Popen[str], timeout_s: float) -> Iterator[threading.Event]:
    """Kill `process` if the block is still running `timeout_s` from now (with the processes
    it started, when it leads a session of its own, as `spawn` starts it: one of them may hold
    its output pipe open); yields an event that is set when it was killed so."""
    timed_out = threading.Event()

    def give_up() -> None:
        timed_out.set()
        try:
            if os.getpgid(process.pid) == process.pid:
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.kill()
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout_s, give_up)
    timer.start()
    try:
        yield timed_out
    finally:
        timer.cancel()


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
) -> tuple[int, list[str]]:
    """Run `argv` to its end (stderr merged into stdout), calling `on_line` with each output
    line, newline stripped, as it comes; return (exit code, lines). Past `timeout_s` the
    process is killed, silent or not, and TimeoutError carries its last lines; it is stopped
    by PID on any way out."""
    process = spawn(argv, env=env, cwd=cwd, merge_stderr=True)
    assert process.stdout is not None
    lines: list[str] = []
    try:
        with killed_after(process, timeout_s) as timed_out:
            for raw in process.stdout:
                line = raw.rstrip("\n")
                lines.append(line)
                on_line(line)
            process.wait()
    finally:
        stop(process)
    if timed_out.is_set():
        tail = "\n".join(lines[-60:])
        raise TimeoutError(f"{name} did not end within {timeout_s:g} s; its last lines:\n{tail}")
    return process.returncode, lines


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


def stop_pids(pids: Iterable[int], grace_s: float = 10.0, kill_wait_s: float = 5.0) -> set[int]:
    """SIGTERM, wait up to `grace_s`, then SIGKILL; returns the PIDs still alive after that."""
    remaining = {pid for pid in pids if is_alive(pid)}
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, kill_wait_s)):
        for pid in remaining:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while remaining and time.monotonic() < deadline:
            remaining = {pid for pid in remaining if is_alive(pid)}
            if remaining:
                time.sleep(POLL_S)
        if not remaining:
            break
    return remaining


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
