"""One path for every target: the local default (a Ray started here for the run), an
`--address` (a Ray Job on any cluster), or a `--stack` (its RayCluster head reached through
a port-forward, results through its bucket). Results always land in the same local folder."""

from __future__ import annotations

import contextlib
import json
import secrets
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import procs
from launch import pulumi_cli
from launch.port_forward import port_forward, private_file, read_secret
from launch.preempt import scheduled, stack_preemptions
from launch.ray_jobs import ClusterUnreachable, RayTraceDiverter, run_job
from launch.requirements import pinned_requirements
from launch.watchdog import DEFAULT_STALL_TIMEOUT_S, Watchdog
from launch.working_dir import CODE_PACKAGES, staged_working_dir
from launch.workload import WorkloadRun
from netem.lab.processes import MARKER_ENV, marked_pids
from procs.journal import note_removed
from spotlab.config import SpotLabConfig
from spotlab.lab import SpotLab, spot_lab
from spotlab.report import preemption_records
from stacks.outputs import read_ray_cluster_outputs
from vocab.errors import RunFailed, UserError
from vocab.ports import DASHBOARD_PORT
from vocab.preemptions import PREEMPTION_RECORD
from workloads.common.provenance import GIT_COMMIT_ENV, git_commit
from workloads.common.results import default_location
from workloads.common.storage import LocalStorage, copy_all, open_storage
from workloads.common.transport import find_in_log

PROJECT_DIR = pulumi_cli.PROJECT_DIR
RAY_TRACES = "ray-traces.log"
"""<out>/ray-traces.log: Ray's own crash output and worker-pool warnings during the run, kept
out of the terminal."""
LAB_RECORD = "spotlab"
"""<out>/spotlab/{config.json,events.jsonl,preemptions.jsonl}: the lab a run had, and what
became of each of its interruptions (vocab/preemptions.py's fields)."""
TOKEN_KEY = "auth_token"  # the key KubeRay's token Secret holds the Ray token under


class TargetError(UserError, ValueError):
    """Bad or contradictory target flags, or a stack without what a run needs."""


@dataclass(frozen=True)
class Remote:
    address: str
    label: str
    bucket: str | None = None
    region: str | None = None
    s3_endpoint: str | None = None
    token: str | None = field(default=None, repr=False)  # the cluster's Ray token, in memory
    same_python: bool = False
    """The cluster runs this very Python environment on this machine (a local spot lab):
    the job runs with this interpreter, installs nothing, and (without a bucket) writes the
    results folder itself."""


def run_workload(
    run: WorkloadRun,
    address: str | None = None,
    stack: str | None = None,
    out: Path | None = None,
    show: Callable[[str], None] = print,
    lab: SpotLabConfig | None = None,
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
    on_lab: Callable[[SpotLab], None] | None = None,
) -> Path:
    """Run the workload on the chosen target; returns the local results folder. Without
    `--address`/`--stack`, a spot workload (`lab` given) runs on a new local spot lab, any
    other in a Ray started here; on a `--stack`, the lab's `--preemptions` schedule (when
    given) is carried out through AWS FIS (launch/preempt.py); `on_lab` is handed that lab
    once it is up (to preempt its nodes while the job runs). A run that prints no progress
    for `stall_timeout_s` is stopped (RunStalled)."""
    if address and stack:
        raise TargetError("give --address or --stack, not both")
    if address and scheduled(lab):
        raise TargetError("--preemptions: carried out on the spot lab, or on a --stack through "
                          "its AWS FIS templates; a cluster at --address has neither")
    local_out = fresh_results_folder(out, run.name)
    if stack:
        with stack_remote(stack, run.name) as remote, stack_preemptions(
                stack, lab, remote.address, remote.token, local_out, show):
            run_remote(run, remote, local_out, show, stall_timeout_s)
    elif address:
        remote = Remote(address=address, label=f"address:{address}")
        try:
            run_remote(run, remote, local_out, show, stall_timeout_s)
        except ClusterUnreachable as error:
            raise TargetError(f"--address: {error}") from None
    elif lab is not None:
        run_on_spot_lab(run, lab, local_out, show, stall_timeout_s, on_lab)
    else:
        run_local(run, local_out, show, stall_timeout_s)
    return local_out


def fresh_results_folder(out: Path | None, workload: str) -> Path:
    """`--out` (or a new folder under results/<workload>/), refused if it already holds
    files: a run never mixes its results with another's."""
    folder = (out or PROJECT_DIR / default_location(workload)).resolve()
    if folder.exists() and any(folder.iterdir()):
        raise TargetError(f"--out {folder} already holds files")
    return folder


LOCAL_RUN_TIMEOUT_S = 24 * 3600.0


def run_local(run: WorkloadRun, local_out: Path, show: Callable[[str], None] = print,
              stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S) -> None:
    """The workload in a child process here; its `ray.init()` starts a Ray for the run. The
    child and every Ray process it starts carry a marker of this run, so whatever is left of
    them when it ends (by itself, by Ctrl-C, by an error, by the watchdog) is found and
    stopped: Ray's agents outlive a driver that was interrupted."""
    watchdog = Watchdog(stall_timeout_s)

    def shown(line: str) -> None:
        watchdog.saw(line)
        show(line)

    inputs = {flag: str(path.resolve()) for flag, path in run.inputs.items()}
    command = [sys.executable, *run.command(str(local_out), "local", inputs)]
    marker = f"run-{secrets.token_hex(4)}"
    try:
        code, _ = procs.follow(command, RayTraceDiverter(shown, local_out / RAY_TRACES),
                               timeout_s=LOCAL_RUN_TIMEOUT_S,
                               stalled=lambda: watchdog.remaining_s() <= 0,
                               name=run.module,
                               env={**run.env, MARKER_ENV: marker, "PYTHONUNBUFFERED": "1"},
                               cwd=PROJECT_DIR)
    finally:
        with procs.interrupts_ignored():
            left = marked_pids(marker)
            procs.stop_marked(left, marker, grace_s=5.0)
            note_removed(f"the local run of {run.module} and its Ray"
                         f"{f' ({len(left)} processes left, stopped)' if left else ''}")
    watchdog.check()
    if code != 0:
        raise RunFailed(f"{run.module} exited with status {code} (its output is above)")


def run_on_spot_lab(
    run: WorkloadRun, config: SpotLabConfig, local_out: Path, show: Callable[[str], None],
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
    on_lab: Callable[[SpotLab], None] | None = None,
) -> None:
    """A new spot lab for this run: the workload is a Ray Job on the lab's dashboard (the
    same path as --address, with the lab's token), the lab's config, events and preemption
    records are kept in `<out>/spotlab/`, and the lab is removed afterwards, also on failure
    or Ctrl-C."""
    with spot_lab(config, progress=show) as lab:
        if lab.dashboard_url is None:
            raise TargetError("the spot lab runs without a dashboard; jobs need one")
        if on_lab is not None:
            on_lab(lab)
        remote = Remote(address=lab.dashboard_url, label=f"spotlab:{lab.lab_id}",
                        token=lab.token(), same_python=True)
        try:
            run_remote(run, remote, local_out, show, stall_timeout_s)
        finally:
            record = LocalStorage(local_out)
            record.write_bytes(f"{LAB_RECORD}/config.json",
                               json.dumps(config.to_dict(), indent=2).encode())
            if lab.events_path.exists():
                record.write_bytes(f"{LAB_RECORD}/events.jsonl", lab.events_path.read_bytes())
                rows = preemption_records(lab.events())
                record.write_bytes(f"{LAB_RECORD}/{PREEMPTION_RECORD}.jsonl", "".join(
                    json.dumps(row, sort_keys=True) + "\n" for row in rows).encode())


def run_remote(
    run: WorkloadRun, remote: Remote, local_out: Path, show: Callable[[str], None],
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
) -> None:
    """A Ray Job on `remote.address`; results come back through the bucket when there is
    one, else through the job's log."""
    if remote.bucket:
        job_out = f"s3://{remote.bucket}/{default_location(run.name)}"
    elif remote.same_python:  # this machine's disk: what the job records is where it is
        job_out = str(local_out.resolve())
    else:  # the job's own folder on the cluster; the files come back through its log
        job_out = default_location(run.name)
    env = {GIT_COMMIT_ENV: git_commit(), **run.env}
    if remote.region:
        env["AWS_DEFAULT_REGION"] = remote.region
    with staged_working_dir(PROJECT_DIR, run.inputs) as (folder, inputs):
        command = run.command(job_out, remote.label, inputs)
        if remote.bucket is None:
            command.append("--results-to-log")
        elif remote.s3_endpoint:
            command += ["--s3-endpoint", remote.s3_endpoint]
        if remote.same_python:
            requirements, python = None, sys.executable
        else:
            requirements = [*pinned_requirements(PROJECT_DIR, run.module, CODE_PACKAGES),
                            *run.requirements]
            python = "python"
        had_folder = local_out.exists()
        try:
            log = run_job(
                remote.address, folder, command, env, show,
                requirements=requirements, token=remote.token, python=python,
                stall_timeout_s=stall_timeout_s, trace_log=local_out / RAY_TRACES,
            )
        except BaseException:
            if not had_folder:  # a failed run leaves no results folder of only Ray's lines
                (local_out / RAY_TRACES).unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    local_out.rmdir()  # only when empty: nothing else of the run is lost
            raise
    destination = LocalStorage(local_out)
    if remote.bucket:
        copy_all(open_storage(job_out, remote.s3_endpoint), destination)
        return
    files = find_in_log(log)
    if files is None:
        raise RunFailed("the job succeeded but its log carries no results")
    for name, data in files.items():
        destination.write_bytes(name, data)


@contextmanager
def stack_remote(stack: str, experiment: str) -> Iterator[Remote]:
    """The experiment's RayCluster head on the stack, port-forwarded here, with its token
    (read from its Kubernetes Secret into memory), bucket and region. The kubeconfig lives
    in a private temporary file for the run only."""
    outputs: dict[str, Any] = pulumi_cli.stack_outputs(stack, show_secrets=True)
    cluster = read_ray_cluster_outputs(outputs, stack, experiment)
    with private_file(cluster.kubeconfig, ".kubeconfig") as config_file:
        token = read_secret(config_file, cluster.namespace, cluster.token_secret, TOKEN_KEY)
        with port_forward(
            config_file, cluster.namespace, cluster.head_service, DASHBOARD_PORT
        ) as local_port:
            yield Remote(
                address=f"http://127.0.0.1:{local_port}",
                label=f"stack:{stack}",
                bucket=cluster.bucket_name,
                region=cluster.region,
                token=token,
            )
