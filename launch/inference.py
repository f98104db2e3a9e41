"""The inference service's commands from the user's side (`invoke infer-up`, `files-*`,
`members`, `job-*`, `infer-down`, `run-inference`).

`infer-up` starts a spot lab (the local default) and leaves it running, or uses a Ray cluster
at `--address`; it records where the service lives in a small private state file. Each later
command is its own process that imports no Ray: it checks the command as the coordinator
will (`options.parse_command`), has the coordinator's command endpoint prove it holds the
service's token, then sends the command (`workloads/inference/endpoint.py`) and prints the
answer; files go straight to the service's store. infer-up and infer-down connect as Ray
drivers.
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
from launch.options import TargetOptions
from launch.ray_address import NotRay, check_answers_as_ray
from launch.ray_private import reload_auth
from netem.lab.state import state_dir as two_site_state_dir
from vocab.errors import one_line
from vocab.names import NAME
from workloads.common.input_files import read_input_json
from workloads.common.options import OptionError, OptionSpec, check_fields, option
from workloads.common.storage import Storage, open_storage, write_atomically
from workloads.inference.endpoint import (
    EndpointUnreachable,
    ServiceError,
    command_timeout_s,
    read_endpoint,
    send_command,
)
from workloads.inference.files import files_storage, store_errors
from workloads.inference.options import (
    INFERENCE_SPEC,
    DemoOptions,
    InferenceOptions,
    JobOptions,
    ServiceOptions,
    check_name,
    parse_command,
)

if TYPE_CHECKING:
    from spotlab import SpotLabConfig

STATE_DIR_ENV = "SPOTBURST_INFERENCE_STATE_DIR"
LAB_COMMAND_HOST = "127.0.0.1"
"""Where the coordinator of a local lab serves its commands: loopback only."""
RECORD_NAME = "service.json"

@dataclass(frozen=True, kw_only=True)
class InferTargetOptions:
    """Where infer-up puts the service: a new spot lab (the default) or a running cluster."""

    address: str | None = option(None, "Ray address of a running cluster (HOST:PORT of its "
                                 "GCS, or ray://HOST:10001); its token from RAY_AUTH_TOKEN")
    stack: str | None = option(None, "a deployed stack's inference RayCluster (commands "
                               "then reach it through kubectl port-forward)",
                               pattern=NAME)

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
    stack: str | None = None
    """The stack whose inference RayCluster runs the service: commands reach the
    coordinator's pod (the one with the URL's IP) through a `kubectl port-forward`."""

    @classmethod
    def load(cls) -> ServiceRecord:
        path = state_dir() / RECORD_NAME
        if not path.exists():
            raise ServiceError(f"the inference service is not up (no {path}; invoke infer-up)")
        try:
            return cls(**read_input_json("", path, max_bytes=1 << 20))
        except (ValueError, TypeError) as error:  # InputFileError is a ValueError
            raise ServiceError(f"{path}: not a service record ({one_line(error)}); infer-down "
                               "removes it") from None

    def save(self) -> None:
        write_atomically(state_dir() / RECORD_NAME, json.dumps(self.__dict__, indent=2).encode(),
                         private=True)

    def storage(self) -> Storage:
        return open_storage(self.store, self.store_endpoint)

    def files(self) -> Storage:
        return files_storage(self.store, self.store_endpoint)


def _reachable(address: str) -> None:
    """A quick refusal instead of Ray's minute of reconnecting to a cluster that is gone, or
    to a server that is no Ray cluster (silent, dripping, another protocol)."""
    try:
        check_answers_as_ray(address)
    except NotRay as error:
        raise ServiceError(f"{error} (was its lab removed? infer-down clears the record)") \
            from None


@contextmanager
def connected(address: str, driver_env: dict[str, str]) -> Iterator[None]:
    """A Ray driver of the service's cluster for the `with` block (quiet: no log echo)."""
    import ray

    from workloads.inference.coordinator import NAMESPACE

    _reachable(address)
    saved = {key: os.environ.get(key) for key in driver_env}
    os.environ.update(driver_env)
    reload_auth()
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
        reload_auth()


def infer_up(options: ServiceOptions, lab: SpotLabConfig,
             address: str | None = None, stack: str | None = None) -> ServiceRecord:
    """Start the service (and, without --address, a spot lab for it) and record it."""
    from spotlab import start_lab, stop_lab
    from workloads.inference.service import check_store_reaches_every_node, start_coordinator

    if (state_dir() / RECORD_NAME).exists():
        record = ServiceRecord.load()
        raise ServiceError(f"the inference service is already up (Ray at "
                           f"{record.ray_address}); infer-down first")
    if stack:
        return _infer_up_on_stack(options, stack)
    store = options.store or str(pulumi_cli.PROJECT_DIR / "results" / "inference" /
                                 f"store-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    if "://" not in store:
        store = str(Path(store).resolve())  # every node of the lab reads the same folder
    with store_errors(store):  # the store answers before anything starts
        open_storage(store, options.store_endpoint).names()
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
            check_store_reaches_every_node(store)
            start_coordinator({**options.settings(store), "command_token": token,
                               "command_host": None if address else LAB_COMMAND_HOST},
                              on_demand=address is None)
        record = ServiceRecord(ray_address, driver_env, store, options.store_endpoint,
                               lab_id, time.time(), token)
        with store_errors(store):
            published = read_endpoint(record.storage()) or {}  # written before it answered
        record = replace(record, command_url=published.get("url"))
        record.save()
    except BaseException:
        if lab_id is not None:
            stop_lab(lab_id)
        raise
    return record


def _infer_up_on_stack(options: ServiceOptions, stack: str) -> ServiceRecord:
    """The coordinator started by a short Ray Job on the stack's inference RayCluster (the
    stack path of every --stack run: the head's port-forward and token); the store is on
    the stack's bucket unless --store says otherwise."""
    token = secrets.token_urlsafe(32)
    summary = _service_job(stack, "up", {**options.settings(options.store or ""),
                                         "command_token": token})
    record = ServiceRecord(f"stack:{stack}", {}, summary["store"], options.store_endpoint,
                           None, time.time(), token,
                           (summary.get("endpoint") or {}).get("url"), stack)
    record.save()
    return record


def _service_job(stack: str, action: str,
                 settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """`python -m workloads.inference.up --action ACTION` as a Ray Job on the stack; its
    summary. The settings travel as a private file with the job's code; the command token
    does not (the code folder is every worker's working folder): it is the job's
    environment (COMMAND_TOKEN_ENV), which the job's driver alone reads."""
    from contextlib import ExitStack
    from tempfile import TemporaryDirectory

    from launch.port_forward import private_file
    from launch.targets import run_workload
    from launch.workload import workload_run
    from workloads.inference.endpoint import COMMAND_TOKEN_ENV
    from workloads.inference.up import SERVICE_JOB_SPEC, ServiceJobOptions

    with ExitStack() as files:
        scratch = Path(files.enter_context(TemporaryDirectory(prefix="spotburst-inference-")))
        token = (settings or {}).get("command_token")
        settings_file = (None if settings is None else files.enter_context(private_file(
            json.dumps({**settings, "command_token": None}), ".json")))
        job = replace(workload_run("inference", "workloads.inference.up", SERVICE_JOB_SPEC,
                                   ServiceJobOptions(action=action, settings=settings_file)),
                      env={COMMAND_TOKEN_ENV: token} if token else {})
        folder = run_workload(job, stack=stack, out=scratch / "job")
        summary: dict[str, Any] = json.loads((folder / "summary.json").read_text())
    return summary


def infer_down() -> list[str]:
    """Stop the workers and the coordinator, and the lab if infer-up started one."""
    from spotlab import SpotLabNotFound, stop_lab
    from workloads.inference.service import stop_coordinator

    path = state_dir() / RECORD_NAME
    try:
        record = ServiceRecord.load()
    except ServiceError as error:
        if not path.exists():
            raise
        path.unlink()  # a record no command can use: infer-up must be able to start again
        return [f"{error}", f"removed {path}; a spot lab it started is listed by "
                "spot-lab-status and removed by spot-lab-down"]
    done: list[str] = []
    try:
        if record.stack:
            stopped = _service_job(record.stack, "down")["workers_stopped"]
        else:
            with connected(record.ray_address, record.driver_env):
                stopped = stop_coordinator()
        done.append(f"coordinator and {stopped} workers stopped")
    except (ServiceError, ConnectionError) as error:
        done.append(f"coordinator not stopped: {error}")
    if record.lab_id is not None:
        try:
            stop_lab(record.lab_id)
            done.append(f"spot lab {record.lab_id} removed")
        except SpotLabNotFound:  # removed by spot-lab-down, or the machine restarted
            done.append(f"spot lab {record.lab_id} was already gone")
    (state_dir() / RECORD_NAME).unlink(missing_ok=True)
    done.append(f"files kept in {record.store}")
    return done


def command(method: str, *args: Any) -> dict[str, Any]:
    """One coordinator command over HTTP (no Ray driver), checked here as the coordinator
    checks it: sent where the coordinator answered last, else where the store says its
    current incarnation answers (a restarted coordinator may be on another node or port).
    An endpoint gets the token only after proving it holds it; the URL that proved it and
    answered becomes the record's. One line when none answers (restarting)."""
    try:
        parse_command(method, list(args))
    except OptionError as error:
        raise ServiceError(str(error)) from None
    record = ServiceRecord.load()
    if not record.command_token:
        raise ServiceError("the service's record has no command token (an older infer-up "
                           "started it): infer-down, then infer-up")
    unanswered: EndpointUnreachable | None = None
    if record.command_url:
        try:
            return _send(record, record.command_url, method, list(args))
        except EndpointUnreachable as error:
            unanswered = error
    with store_errors(record.store):
        published = read_endpoint(record.storage()) or {}
    url = published.get("url")
    if not url:
        raise ServiceError("the coordinator has published no command endpoint in the store "
                           f"{record.store} (not up: infer-down stopped it?)")
    if not isinstance(url, str):
        raise ServiceError(f"the store {record.store}: its endpoint record names no URL")
    if url != record.command_url:
        try:
            answer = _send(record, url, method, list(args))
        except EndpointUnreachable as error:
            unanswered = error
        else:
            replace(record, command_url=url).save()  # it proved itself and answered
            return answer
    raise ServiceError(f"the coordinator (incarnation {published.get('incarnation')}) does "
                       f"not answer, restarting? try again in a few seconds: {unanswered}")


def _send(record: ServiceRecord, url: str, method: str, args: list[Any]) -> dict[str, Any]:
    assert record.command_token
    if record.stack is None:
        return send_command(url, record.command_token, method, args, command_timeout_s(method))
    with _through_stack(record.stack, url) as local_url:
        return send_command(url, record.command_token, method, args, command_timeout_s(method),
                            connect_url=local_url)


@contextmanager
def _through_stack(stack: str, url: str) -> Iterator[str]:
    """The URL of the stack's coordinator pod (the pod with `url`'s IP), port-forwarded
    here for one command; EndpointUnreachable when no pod has that IP any more."""
    from urllib.parse import urlsplit

    from launch.port_forward import port_forward, private_file
    from stacks.outputs import read_ray_cluster_outputs

    where = urlsplit(url)
    cluster = read_ray_cluster_outputs(pulumi_cli.stack_outputs(stack, show_secrets=True),
                                       stack, "inference")
    with private_file(cluster.kubeconfig, ".kubeconfig") as config_file:
        pod = _pod_with_ip(config_file, cluster.namespace, str(where.hostname))
        with port_forward(config_file, cluster.namespace, pod, int(where.port or 80),
                          kind="pod") as local_port:
            yield f"http://127.0.0.1:{local_port}"


def _pod_with_ip(config_file: Path, namespace: str, ip: str) -> str:
    import subprocess

    command = ["kubectl", "--kubeconfig", str(config_file), "get", "pods", "-n", namespace,
               "--field-selector", f"status.podIP={ip},status.phase=Running",
               "-o", "jsonpath={.items[*].metadata.name}"]
    try:
        found = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise ServiceError("kubectl is not installed (needed for a service on a stack)") from None
    except subprocess.TimeoutExpired:
        raise ServiceError(f"kubectl get pods -n {namespace}: no answer within 30 s") from None
    names = found.stdout.split()
    if found.returncode != 0:
        raise ServiceError(f"kubectl get pods -n {namespace}: "
                           f"{' '.join(found.stderr.split()) or 'failed'}")
    if len(names) != 1:
        raise EndpointUnreachable(f"no running pod with IP {ip} in namespace {namespace}")
    return names[0]


def job_add(name: str, job: JobOptions) -> dict[str, Any]:
    try:
        files = job.files()
    except OptionError as error:
        raise ServiceError(str(error)) from None
    return command("job_add", name, *files, job.batch_size)


def files_put(local: Path, name: str) -> str:
    from workloads.inference.files import files_put as put

    _check_store_name(name)
    record = ServiceRecord.load()
    with store_errors(record.store):
        size = put(record.files(), local, name, record.storage())
    return f"put {local} as {name} ({size} bytes)"


def files_get(name: str, local: Path) -> str:
    from workloads.inference.files import files_get as get

    _check_store_name(name)
    record = ServiceRecord.load()
    with store_errors(record.store):
        size = get(record.files(), name, local)
    return f"got {name} into {local} ({size} bytes)"


def _check_store_name(name: str) -> None:
    try:
        check_name("NAME", name)
    except OptionError as error:
        raise ServiceError(str(error)) from None


def files_ls() -> list[str]:
    from workloads.inference.files import files_ls as ls

    record = ServiceRecord.load()
    with store_errors(record.store):
        return ls(record.files())


def files_demo(options: DemoOptions) -> list[str]:
    """The demo's model, test set and labels (the small network on the held-out digits) as
    local files for files-put; one line per file written."""
    from workloads.inference.models import write_demo_files

    try:
        folder = options.folder()
    except OptionError as error:
        raise ServiceError(str(error)) from None
    try:
        written = write_demo_files(folder, repeat=options.repeat)
    except OSError as error:
        raise ServiceError(f"--dir {str(folder)!r}: {one_line(error)}") from None
    return [f"wrote {path} ({path.stat().st_size} bytes)" for path in written]


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


def run_inference(options: InferenceOptions, lab: SpotLabConfig,
                  target: TargetOptions | None = None,
                  show: Callable[[str], None] = print) -> Path:
    """`invoke run-inference`: the experiment as one Ray Job on a new spot lab (or
    --address/--stack), which brings the service up and down itself; figures drawn here.
    The store is one every node reaches: on the local lab `<results folder>/store` by its
    absolute path (the lab's nodes share this machine), on a stack the job puts it beside
    its results on the stack's bucket; an --address cluster needs --store unless all its
    nodes are on one machine (the job checks)."""
    from launch.targets import fresh_results_folder, run_workload
    from launch.workload import workload_run
    from workloads.inference.figures import draw

    target = target or TargetOptions()
    address, stack, out = target.address, target.stack, target.out
    if not (address or stack):
        out = fresh_results_folder(out, "inference")
        if options.store is None:
            options = replace(options, store=str(out / "store"))
    if options.store is not None and "://" not in options.store:
        options = replace(options, store=str(Path(options.store).resolve()))
    run = workload_run("inference", "workloads.inference", INFERENCE_SPEC, options)
    folder = run_workload(run, address, stack, out, show, lab=lab,
                          stall_timeout_s=target.stall_timeout)
    draw(folder)
    return folder
