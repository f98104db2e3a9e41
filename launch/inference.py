"""The inference service's commands from the user's side (`invoke infer-up`, `files-*`,
`members`, `job-*`, `infer-down`, `run-inference`).

`infer-up` starts a spot lab (the local default) and leaves it running, or uses a Ray cluster
at `--address`; it records where the service lives in a small private state file. Each later
command is its own process that imports no Ray: it sends one HTTP request to the
coordinator's command endpoint with the service's token (`workloads/inference/endpoint.py`)
and prints the answer; files go straight to the service's store. infer-up and infer-down
connect as Ray drivers.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launch import pulumi_cli
from netem.lab.state import state_dir as two_site_state_dir
from workloads.common.options import OptionError, OptionSpec, check_fields, option
from workloads.common.storage import Storage, open_storage
from workloads.inference.endpoint import (
    COMMAND_TIMEOUT_S,
    EndpointUnreachable,
    ServiceError,
    read_endpoint,
    send_command,
)
from workloads.inference.files import files_storage
from workloads.inference.options import (
    INFERENCE_SPEC,
    InferenceOptions,
    JobOptions,
    ServiceOptions,
)

if TYPE_CHECKING:
    from spotlab import SpotLabConfig

STATE_DIR_ENV = "SPOTBURST_INFERENCE_STATE_DIR"
RECORD_NAME = "service.json"

@dataclass(frozen=True, kw_only=True)
class InferTargetOptions:
    """Where infer-up puts the service: a new spot lab (the default) or a running cluster."""

    address: str | None = option(None, "Ray address of a running cluster (HOST:PORT of its "
                                 "GCS, or ray://HOST:10001); its token from RAY_AUTH_TOKEN")
    stack: str | None = option(None, "a deployed stack's inference RayCluster (not yet for "
                               "the long-running service: run-inference --stack runs the "
                               "experiment there)")

    def __post_init__(self) -> None:
        check_fields(self)
        if self.address and self.stack:
            raise OptionError("--address", "give --address or --stack, not both")


INFER_TARGET_SPEC = OptionSpec(InferTargetOptions)


def state_dir() -> Path:
    if STATE_DIR_ENV in os.environ:
        return Path(os.environ[STATE_DIR_ENV])
    return two_site_state_dir().parent / "inference"


@dataclass(frozen=True)
class ServiceRecord:
    """Where the service lives: what every command needs to reach it."""

    ray_address: str
    driver_env: dict[str, str]
    store: str
    store_endpoint: str | None
    lab_id: str | None
    started_at: float
    command_token: str | None = None
    """The bearer token of the coordinator's HTTP commands (so the record file is private)."""
    command_url: str | None = None
    """Where the coordinator answered last; the store's endpoint file says where it is now."""

    @classmethod
    def load(cls) -> ServiceRecord:
        path = state_dir() / RECORD_NAME
        if not path.exists():
            raise ServiceError(f"the inference service is not up (no {path}; invoke infer-up)")
        return cls(**json.loads(path.read_text()))

    def save(self) -> None:
        path = state_dir() / RECORD_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(json.dumps(self.__dict__, indent=2))
        scratch.replace(path)

    def storage(self) -> Storage:
        return open_storage(self.store, self.store_endpoint)

    def files(self) -> Storage:
        return files_storage(self.store, self.store_endpoint)


def _reachable(address: str) -> None:
    """A quick refusal instead of Ray's minute of reconnecting to a cluster that is gone."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=1.0):
            pass
    except (OSError, ValueError):
        raise ServiceError(f"the service's Ray cluster at {address} does not answer "
                           "(was its lab removed? infer-down clears the record)") from None


@contextmanager
def connected(address: str, driver_env: dict[str, str]) -> Iterator[None]:
    """A Ray driver of the service's cluster for the `with` block (quiet: no log echo)."""
    import ray

    from workloads.inference.coordinator import NAMESPACE

    _reachable(address)
    saved = {key: os.environ.get(key) for key in driver_env}
    os.environ.update(driver_env)
    _reload_auth()
    try:
        ray.init(address=address, namespace=NAMESPACE, logging_level=logging.ERROR,
                 log_to_driver=False, configure_logging=True)
        try:
            yield
        finally:
            ray.shutdown()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _reload_auth()


def _reload_auth() -> None:
    """Ray caches its auth mode and token per process: make it read the environment again
    (a driver of one lab after another, or after `import ray` saw no token)."""
    from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def infer_up(options: ServiceOptions, lab: SpotLabConfig,
             address: str | None = None, stack: str | None = None) -> ServiceRecord:
    """Start the service (and, without --address, a spot lab for it) and record it."""
    from spotlab import start_lab, stop_lab
    from workloads.inference.service import start_coordinator

    if stack:
        raise ServiceError("--stack: not supported yet by infer-up (invoke run-inference "
                           "--stack runs the experiment on the stack's inference RayCluster)")
    if (state_dir() / RECORD_NAME).exists():
        record = ServiceRecord.load()
        raise ServiceError(f"the inference service is already up (Ray at "
                           f"{record.ray_address}); infer-down first")
    store = options.store or str(pulumi_cli.PROJECT_DIR / "results" / "inference" /
                                 f"store-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    lab_id = None
    if address:
        ray_address, driver_env = address, {}
    else:
        spot_lab = start_lab(lab)
        lab_id, ray_address, driver_env = (spot_lab.lab_id, spot_lab.ray_address,
                                           spot_lab.driver_env)
    token = secrets.token_urlsafe(32)
    try:
        with connected(ray_address, driver_env):
            start_coordinator({**options.settings(store), "command_token": token},
                              on_demand=address is None)
        record = ServiceRecord(ray_address, driver_env, store, options.store_endpoint,
                               lab_id, time.time(), token)
        published = read_endpoint(record.storage()) or {}  # written before it answered
        record = replace(record, command_url=published.get("url"))
        record.save()
    except BaseException:
        if lab_id is not None:
            stop_lab(lab_id)
        raise
    return record


def infer_down() -> list[str]:
    """Stop the workers and the coordinator, and the lab if infer-up started one."""
    from spotlab import stop_lab
    from workloads.inference.service import stop_coordinator

    record = ServiceRecord.load()
    done: list[str] = []
    try:
        with connected(record.ray_address, record.driver_env):
            stopped = stop_coordinator()
        done.append(f"coordinator and {stopped} workers stopped")
    except (ServiceError, ConnectionError) as error:
        done.append(f"coordinator not stopped: {error}")
    if record.lab_id is not None:
        stop_lab(record.lab_id)
        done.append(f"spot lab {record.lab_id} removed")
    (state_dir() / RECORD_NAME).unlink(missing_ok=True)
    done.append(f"files kept in {record.store}")
    return done


def command(method: str, *args: Any) -> dict[str, Any]:
    """One coordinator command over HTTP (no Ray driver): sent where the coordinator answered
    last, else where the store says its current incarnation answers (a restarted coordinator
    may be on another node or port); one line when none answers (restarting)."""
    record = ServiceRecord.load()
    if not record.command_token:
        raise ServiceError("the service's record has no command token (an older infer-up "
                           "started it): infer-down, then infer-up")
    unanswered: EndpointUnreachable | None = None
    if record.command_url:
        try:
            return send_command(record.command_url, record.command_token, method, list(args),
                                COMMAND_TIMEOUT_S)
        except EndpointUnreachable as error:
            unanswered = error
    published = read_endpoint(record.storage()) or {}
    url = published.get("url")
    if not url:
        raise ServiceError("the coordinator has published no command endpoint in the store "
                           f"{record.store} (not up: infer-down stopped it?)")
    if url != record.command_url:
        replace(record, command_url=url).save()
        try:
            return send_command(url, record.command_token, method, list(args),
                                COMMAND_TIMEOUT_S)
        except EndpointUnreachable as error:
            unanswered = error
    raise ServiceError(f"the coordinator (incarnation {published.get('incarnation')}) does "
                       f"not answer, restarting? try again in a few seconds: {unanswered}")


def job_add(name: str, job: JobOptions) -> dict[str, Any]:
    return command("job_add", name, *job.files(), job.batch_size)


def files_put(local: Path, name: str) -> str:
    from workloads.inference.files import files_put as put

    size = put(ServiceRecord.load().files(), local, name)
    return f"put {local} as {name} ({size} bytes)"


def files_get(name: str, local: Path) -> str:
    from workloads.inference.files import files_get as get

    size = get(ServiceRecord.load().files(), name, local)
    return f"got {name} into {local} ({size} bytes)"


def files_ls() -> list[str]:
    from workloads.inference.files import files_ls as ls

    return ls(ServiceRecord.load().files())


# --- printing -------------------------------------------------------------------------------


def format_status(answer: dict[str, Any]) -> str:
    lines = [f"coordinator incarnation {answer['coordinator_incarnation']}, "
             f"policy {answer['policy']}"]
    for name, job in answer["jobs"].items():
        latency = job["latency"]
        lat = ("-" if latency["mean_ms"] is None else
               "mean {mean_ms:.3f} std {std_ms:.3f} median {median_ms:.3f} p90 {p90_ms:.3f} "
               "p95 {p95_ms:.3f} p99 {p99_ms:.3f} ms".format(**latency))
        accuracy = "" if job.get("accuracy") is None else f", accuracy {job['accuracy']:.4f}"
        lines.append(
            f"{name}: {job['state']}, {job['processed']}/{job['queries']} queries "
            f"({100 * job['progress']:.1f} %), {job['query_rate']:.1f} queries/s, "
            f"{len(job['assigned_workers'])} workers assigned{accuracy}\n"
            f"  latency per query: {lat}"
            + (f"\n  error: {job['error']}" if job.get("error") else ""))
    if not answer["jobs"]:
        lines.append("no jobs (job-add)")
    return "\n".join(lines)


def format_members(answer: dict[str, Any]) -> str:
    lines = [f"coordinator incarnation {answer['coordinator_incarnation']}", "nodes:"]
    for node in answer["nodes"]:
        pool = node["labels"].get("pool", "?")
        lines.append(f"  {node['node_id'][:12]} {pool:9} {'alive' if node['alive'] else 'dead'}"
                     f" cpus={node['cpus']:g}")
    lines.append("workers:")
    for worker in answer["workers"]:
        doing = f" {worker['job']}#{worker['sub_job']}" if worker["job"] else ""
        node = (worker["node_id"] or "-")[:12]
        lines.append(f"  {worker['name']} {worker['state']}{doing} node={node} "
                     f"pid={worker['pid']}")
    return "\n".join(lines)


def run_inference(options: InferenceOptions, lab: SpotLabConfig, address: str | None = None,
                  stack: str | None = None, out: Path | None = None,
                  show: Callable[[str], None] = print) -> Path:
    """`invoke run-inference`: the experiment as one Ray Job on a new spot lab (or
    --address/--stack), which brings the service up and down itself; figures drawn here."""
    from launch.targets import run_workload
    from launch.workload import workload_run
    from workloads.inference.figures import draw

    run = workload_run("inference", "workloads.inference", INFERENCE_SPEC, options)
    folder = run_workload(run, address, stack, out, show, lab=lab)
    draw(folder)
    return folder
