"""A workload as a Ray Job on any cluster's dashboard address: submit it with the staged
code as `runtime_env.working_dir`, stream its log, and return the log once it ends."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
import time
from collections.abc import Callable
from pathlib import Path

from ray._private.authentication.authentication_token_setup import (
    maybe_enable_token_auth_if_token_available,
)
from ray.job_submission import JobStatus, JobSubmissionClient

from launch.watchdog import DEFAULT_STALL_TIMEOUT_S, Watchdog
from procs import interrupts_ignored
from procs.journal import note_removed
from vocab.errors import RunFailed, UserError
from workloads.common.transport import MARKER


class JobFailed(RunFailed, RuntimeError):
    """The job ended in a state other than SUCCEEDED; `tail` holds its log's last lines."""

    def __init__(self, message: str, tail: str = "") -> None:
        super().__init__(message)
        self.tail = tail


class ClusterUnreachable(UserError, ConnectionError):
    """No Ray dashboard answers at the address; nothing was submitted."""


END_TIMEOUT_S = 300.0
"""How long a job whose log stream has closed may take to reach a final state (its driver
still shutting down Ray, the cluster busy)."""


def wait_for_end(status: Callable[[], JobStatus], timeout_s: float = END_TIMEOUT_S,
                 poll_s: float = 0.5) -> JobStatus:
    """The job's final state. The log stream can close while the job is still RUNNING (a
    run's last lines written, its driver not yet exited): asking once then called a finished
    run a failure and dropped its results."""
    deadline = time.monotonic() + timeout_s
    while True:
        current = status()
        if current.is_terminal() or time.monotonic() >= deadline:
            return current
        time.sleep(poll_s)


def use_token_auth_if_available() -> None:
    """Ray 2.60 clusters started locally require a token, and a Jobs client sends one only in
    token mode. When RAY_AUTH_MODE is unset and a token can be found (~/.ray/auth_token,
    RAY_AUTH_TOKEN_PATH, RAY_AUTH_TOKEN), switch this process to token mode the way
    `ray.init()` does when it joins a cluster (the mode is cached when Ray is imported, so
    setting the variable alone is too late)."""
    setup_logger = logging.getLogger(maybe_enable_token_auth_if_token_available.__module__)
    level = setup_logger.level
    setup_logger.setLevel(logging.ERROR)  # its warning would precede a task's one-line error
    try:
        maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    finally:
        setup_logger.setLevel(level)


def token_headers(token: str | None) -> dict[str, str] | None:
    """The Jobs client's own Authorization header for a cluster's token: sent with this
    client's requests only, never put in the environment or Ray's process-wide caches (a
    later `ray.init()` in the same process must not see it)."""
    return {"Authorization": f"Bearer {token}"} if token else None


async def _follow(client: JobSubmissionClient, job_id: str, show: Callable[[str], None],
                  watchdog: Watchdog) -> None:
    """Show the job's log lines as they come, until the log ends; RunStalled once the job
    printed no progress for the watchdog's timeout."""
    pending = ""
    chunks = client.tail_job_logs(job_id).__aiter__()
    # waited for without a timeout of its own: cancelling the log's generator would end it
    next_chunk = asyncio.ensure_future(chunks.__anext__())
    while True:
        done, _ = await asyncio.wait({next_chunk}, timeout=max(watchdog.remaining_s(), 0.1))
        if not done:
            watchdog.check()
            continue
        try:
            chunk = next_chunk.result()
        except StopAsyncIteration:
            break
        next_chunk = asyncio.ensure_future(chunks.__anext__())
        pending += chunk
        *lines, pending = pending.split("\n")
        for line in lines:
            if not line.startswith(MARKER):
                watchdog.saw(line)
                show(line)
        watchdog.check()
    if pending and not pending.startswith(MARKER):
        show(pending)


def run_job(
    address: str,
    working_dir: Path,
    command: list[str],
    env: dict[str, str],
    show: Callable[[str], None] = print,
    requirements: list[str] | None = None,
    token: str | None = None,
    python: str = "python",
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
) -> str:
    """Submit `<python> <command>` and stream its log until it ends; returns the whole log.
    `requirements` (pinned) are pip-installed into the job's environment on the cluster.
    Raises JobFailed (with the log's tail) unless the job succeeded."""
    use_token_auth_if_available()
    try:
        client = JobSubmissionClient(address, headers=token_headers(token))
    except ConnectionError as error:
        raise ClusterUnreachable(f"no Ray dashboard answers at {address} ({error})") from None
    entrypoint = shlex.join([python, *command])
    runtime_env: dict[str, object] = {"working_dir": str(working_dir), "env_vars": env}
    if requirements:
        runtime_env["pip"] = {"packages": requirements, "pip_check": False}
    job_id = client.submit_job(entrypoint=entrypoint, runtime_env=runtime_env)
    show(f"submitted Ray job {job_id} to {address}")
    try:
        asyncio.run(_follow(client, job_id, show, Watchdog(stall_timeout_s)))
    except BaseException:  # Ctrl-C, SIGTERM or a lost stream: the job must not run on
        with interrupts_ignored(), contextlib.suppress(Exception):  # a cluster gone too
            if client.stop_job(job_id):
                note_removed(f"Ray job {job_id} (stopped)")
        raise
    status = wait_for_end(lambda: client.get_job_status(job_id))
    log = client.get_job_logs(job_id)
    if status != JobStatus.SUCCEEDED:
        tail = "\n".join(line for line in log.splitlines()[-20:] if not line.startswith(MARKER))
        raise JobFailed(f"Ray job {job_id} ended {status} (its log is above)", tail)
    return log
