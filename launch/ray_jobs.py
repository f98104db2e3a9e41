"""A workload as a Ray Job on any cluster's dashboard address: submit it with the staged
code as `runtime_env.working_dir`, stream its log (without Ray's own C++ crash output and
log lines, which go to a file: ray_own_line), and return the log once it ends."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import re
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ray.job_submission import JobStatus, JobSubmissionClient

from launch.ray_private import use_token_auth_if_available
from launch.watchdog import DEFAULT_STALL_TIMEOUT_S, Watchdog
from procs import interrupts_ignored
from procs.journal import note_removed
from vocab.errors import RunFailed, UserError, one_line
from workloads.common.deadline import DeadlineExceeded, call_within
from workloads.common.transport import MARKER


class JobFailed(RunFailed, RuntimeError):
    """The job ended in a state other than SUCCEEDED; `tail` holds its log's last lines."""

    def __init__(self, message: str, tail: str = "") -> None:
        super().__init__(message)
        self.tail = tail


class ClusterUnreachable(UserError, ConnectionError):
    """No Ray dashboard answers at the address; nothing was submitted."""


HTTP_CONNECT_TIMEOUT_S = 5.0
HTTP_READ_TIMEOUT_S = 15.0
HTTP_DEADLINE_S = 20.0
"""The longest one Jobs API call (the version check, submit, status, stop) may take: to
connect HTTP_CONNECT_TIMEOUT_S, each read HTTP_READ_TIMEOUT_S, and the whole call
HTTP_DEADLINE_S even from a server that drips its answer a byte at a time: an address that
is no Ray dashboard is one line within it. The log stream is watched by the run's progress
watchdog instead (--stall-timeout)."""
TRANSFER_DEADLINE_S = 600.0
"""The whole-call deadline of the calls whose size is the run's own: the code's upload and
the finished job's whole log (only ever sent to a dashboard that answered already)."""
TRANSFERS = re.compile(r"(PUT /api/packages/|GET /api/jobs/[^/]+/logs$)")


class _DeadlineClient(JobSubmissionClient):
    """Ray's Jobs client with a deadline on every HTTP call. Its calls go through
    `_do_request`, which passes no timeout to `requests` (a private seam of Ray's SDK, the
    one place every call passes)."""

    def _do_request(self, method: str, endpoint: str, **kwargs: Any) -> Any:
        kwargs.setdefault("timeout", (HTTP_CONNECT_TIMEOUT_S, HTTP_READ_TIMEOUT_S))
        call = super()._do_request
        deadline = (TRANSFER_DEADLINE_S if TRANSFERS.match(f"{method} {endpoint}")
                    else HTTP_DEADLINE_S)
        try:
            return call_within(lambda: call(method, endpoint, **kwargs), deadline)
        except DeadlineExceeded:
            raise ClusterUnreachable(f"the Ray dashboard at {self._address} did not answer "
                                     f"{method} {endpoint} within {deadline:g} s") from None


def jobs_client(address: str, token: str | None) -> JobSubmissionClient:
    """A Jobs client of the dashboard at `address` (it asks the cluster's version at once);
    ClusterUnreachable, in one line naming the address, when nothing answers there as a Ray
    dashboard does (refused, silent past the deadline, an HTML page, an error status)."""
    import requests

    try:
        return _DeadlineClient(address, headers=token_headers(token))
    except ClusterUnreachable:
        raise
    except (ConnectionError, requests.RequestException, RuntimeError, ValueError,
            KeyError) as error:
        raise ClusterUnreachable(f"no Ray dashboard answers at {address} "
                                 f"({one_line(error)})") from None


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


def token_headers(token: str | None) -> dict[str, str] | None:
    """The Jobs client's own Authorization header for a cluster's token: sent with this
    client's requests only, never put in the environment or Ray's process-wide caches (a
    later `ray.init()` in the same process must not see it)."""
    return {"Authorization": f"Bearer {token}"} if token else None


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SOURCE = re.compile(r"^\([^)]*\) ")  # Ray's "(raylet) " or "(task pid=1, ip=...) "
_GLOG = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,.]+ [IWEF] \d+ \d+\] (\([^)]*\) )?[\w.]+:\d+: ")
_STARTS_TRACE = re.compile(
    r"^(\*\*\* (SIG\w+ received at time=|Check failure stack trace|StackTrace Information"
    r"|Aborted at)|PC: @\s+0x|@\s+0x[0-9a-f]+\s|\S*\(\S*\+0x[0-9a-f]+\) \[0x[0-9a-f]+\]"
    r"|Raylet is terminated\.)|Check failed:")
# The raylet's note that it started many worker processes: a workload of many actors on few
# CPUs (DOLL's fleet on 2 cores) meets it by design, so it is kept out of the user's view.
_WORKER_POOL_WARNING = re.compile(r"^WARNING: \d+ \w+ worker processes have been started on ")
# Ray Train's controller and workers log their every step of bookkeeping (worker groups,
# process groups, state transitions), and so do torchft's replica groups and Lighthouse in
# survivor mode (quorums, recoveries); Ray's own Python loggers (`INFO worker.py:1 -- ...`)
# note connections and shutdowns. Neither is the run's: kept in the file unless --verbose.
_RAY_TRAIN_SOURCE = re.compile(
    r"^\((RayTrainWorker|TrainController|ReplicaGroup|LighthouseServerActor)\b[^)]*\) ")
_RAY_LOGGER = re.compile(r"^(\[?\d{4}-\d\d-\d\d [\d:,.]+\]?\s+)?(INFO|WARNING|DEBUG) "
                         r"[\w.]+\.py:\d+ -- ")
SHOW_RAY_LOG_LINES: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "SHOW_RAY_LOG_LINES", default=False)
"""Whether Ray's and Ray Train's own log lines reach the terminal (a run task's --verbose)."""


@contextlib.contextmanager
def ray_log_lines_shown(shown: bool) -> Iterator[None]:
    """Within it, the diverters made here show Ray's own log lines (`--verbose`)."""
    token = SHOW_RAY_LOG_LINES.set(shown)
    try:
        yield
    finally:
        SHOW_RAY_LOG_LINES.reset(token)


def ray_trace_line(line: str, in_block: bool) -> bool:
    """Whether a line of a Ray Job's log belongs to a block of Ray's own C++ crash output:
    a fatal signal's report (`*** SIGTERM received at time=... ***`, `PC: @ 0x...`), its
    stack frames (`@ 0x... main`, `raylet(+0x45c44c) [0x...] ray::rpc::GrpcServer::Run()`),
    a failed check (`Check failed: ...`, `*** StackTrace Information ***`) or the raylet's
    death notice (`Raylet is terminated. ...`, then its indented last log lines), with
    Ray's prefixes (colour codes, `(raylet) `, a glog header) or without. `in_block`: whether
    the line before belonged to one; blank and indented lines continue a block."""
    text = _ANSI.sub("", line)
    text = _SOURCE.sub("", text)
    if in_block and (not text.strip() or text.startswith(("    ", "\t"))):
        return True
    text = _GLOG.sub("", text.strip()).strip()
    return bool(_STARTS_TRACE.search(text))


def ray_own_line(line: str, in_block: bool) -> tuple[str | None, bool]:
    """Which of Ray's own outputs kept from the user `line` is ("crash output" (ray_trace_line)
    or "worker-pool warnings", the raylet's warning that it started many worker processes,
    a line of its own, or "log lines": Ray Train's controller and workers, Ray's Python
    loggers' INFO and WARNING), None for a line of the run, and whether a block of crash
    output is open after it."""
    plain = _ANSI.sub("", line)
    if _WORKER_POOL_WARNING.match(_SOURCE.sub("", plain)):
        return "worker-pool warnings", in_block
    in_block = ray_trace_line(line, in_block)
    if in_block:
        return "crash output", in_block
    if _RAY_TRAIN_SOURCE.match(plain) or _RAY_LOGGER.match(_SOURCE.sub("", plain)):
        return "log lines", in_block
    return None, in_block


class RayTraceDiverter:
    """Hands a job's log lines to `show`, except Ray's own output (ray_own_line), which
    goes to `path`; the first line of each kind is announced to `show`, with the path."""

    def __init__(self, show: Callable[[str], None], path: Path) -> None:
        self.show = show
        self.path = path
        self.shows_log_lines = SHOW_RAY_LOG_LINES.get()
        self.in_block = False
        self.diverted = 0
        self.announced: set[str] = set()

    def __call__(self, line: str) -> None:
        kind, self.in_block = ray_own_line(line, self.in_block)
        if kind is None or (kind == "log lines" and self.shows_log_lines):
            self.show(line)
            return
        if kind not in self.announced:
            self.announced.add(kind)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.show(f"(Ray's own {kind} {'is' if kind == 'crash output' else 'are'} in "
                      f"{self.path})")
        self.diverted += 1
        with self.path.open("a") as out:
            out.write(line + "\n")


RAY_LOG_FORMAT = "%(asctime)s\t%(levelname)s %(filename)s:%(lineno)s -- %(message)s"
"""How Ray's own handler writes its Python loggers' records (what ray_own_line knows)."""


class _RayRecords(logging.Handler):
    """Ray's Python log records made in this process (the Jobs client's `Uploading package`,
    `Creating a file package`, `WebSocket closed for job`), as lines: held until `forward`
    names where they go, then handed there."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter(RAY_LOG_FORMAT))
        self.held: list[str] = []
        self.target: Callable[[str], None] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        line = self.format(record)
        if self.target is None:
            self.held.append(line)
        else:
            self.target(line)

    def forward(self, target: Callable[[str], None]) -> None:
        self.target = target
        for line in self.held:
            target(line)
        self.held = []


@contextlib.contextmanager
def ray_records_captured() -> Iterator[_RayRecords]:
    """Within it, the records of Ray's `ray` logger in this process go to the handler
    yielded, not to Ray's own handler on the terminal; its held lines are shown on the way out
    if nothing took them."""
    logger = logging.getLogger("ray")
    captured = _RayRecords()
    own = list(logger.handlers)
    for handler in own:
        logger.removeHandler(handler)
    logger.addHandler(captured)
    try:
        yield captured
    finally:
        logger.removeHandler(captured)
        for handler in own:
            logger.addHandler(handler)
        for line in captured.held:
            print(line, file=sys.stderr)


async def _follow(client: JobSubmissionClient, job_id: str, show: Callable[[str], None],
                  watchdog: Watchdog) -> None:
    """Show the job's log lines as they come, until the log ends; RunStalled once the
    watchdog (shown the lines that reach the user) saw no progress for its timeout."""
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
                show(line)
        watchdog.check()
    if pending and not pending.startswith(MARKER):
        show(pending)


def _lost_stream(error: BaseException) -> bool:
    """The log stream broke off (the WebSocket closed abnormally, the connection was reset:
    the head died), as opposed to an interrupt or the watchdog's stop."""
    import aiohttp

    if isinstance(error, UserError | RunFailed):
        return False
    return isinstance(error, ConnectionError | RuntimeError | aiohttp.ClientError
                      | asyncio.TimeoutError)


def without_ray_traces(lines: list[str]) -> list[str]:
    """The lines that are not Ray's own crash output or warnings (ray_own_line); Ray's and
    Ray Train's log lines stay: a failed run's tail may need them."""
    kept, in_block = [], False
    for line in lines:
        kind, in_block = ray_own_line(line, in_block)
        if kind is None or kind == "log lines":
            kept.append(line)
    return kept


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
    trace_log: Path | None = None,
) -> str:
    """Submit `<python> <command>` and stream its log until it ends; returns the whole log.
    `requirements` (pinned) are pip-installed into the job's environment on the cluster.
    Ray's own crash output (C++ stack traces of a node that died, see ray_trace_line) goes
    to `trace_log` (default: a file named after the job in the temp dir) instead of `show`,
    which is told once where. Raises JobFailed (with the log's tail) unless the job
    succeeded."""
    use_token_auth_if_available()
    client = jobs_client(address, token)
    entrypoint = shlex.join([python, *command])
    runtime_env: dict[str, object] = {"working_dir": str(working_dir), "env_vars": env}
    if requirements:
        runtime_env["pip"] = {"packages": requirements, "pip_check": False}
    with ray_records_captured() as ray_records:
        job_id = client.submit_job(entrypoint=entrypoint, runtime_env=runtime_env)
        show(f"submitted Ray job {job_id} to {address}")
        traces = trace_log or Path(tempfile.gettempdir()) / f"spotburst-{job_id}-ray-traces.log"
        return _run_submitted(client, job_id, address, show, traces, stall_timeout_s,
                              ray_records)


def _run_submitted(client: JobSubmissionClient, job_id: str, address: str,
                   show: Callable[[str], None], traces: Path, stall_timeout_s: float,
                   ray_records: _RayRecords) -> str:
    """run_job once the job is in: its log followed (Ray's own lines, this process's among
    them, to `traces`), its end awaited."""
    watchdog = Watchdog(stall_timeout_s)

    def shown(line: str) -> None:
        watchdog.saw(line)
        show(line)

    diverter = RayTraceDiverter(shown, traces)
    ray_records.forward(diverter)
    try:
        asyncio.run(_follow(client, job_id, diverter, watchdog))
    except BaseException as error:  # Ctrl-C, SIGTERM or a lost stream: the job must not
        with interrupts_ignored(), contextlib.suppress(Exception):  # run on a cluster gone too
            if client.stop_job(job_id):
                note_removed(f"Ray job {job_id} (stopped)")
        if _lost_stream(error):
            raise JobFailed(f"Ray job {job_id}: its log stream from {address} broke off "
                            f"({one_line(error)}); the cluster's head may be gone") from None
        raise
    status = wait_for_end(lambda: client.get_job_status(job_id))
    log = client.get_job_logs(job_id)
    if status != JobStatus.SUCCEEDED:
        lines = [line for line in log.splitlines() if not line.startswith(MARKER)]
        tail = "\n".join(without_ray_traces(lines)[-20:])
        raise JobFailed(f"Ray job {job_id} ended {status} (its log is above)", tail)
    return log
