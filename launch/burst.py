"""`invoke run-burst` / `sweep-burst`: the burst workload in the local two-site lab (the
default) or on the AWS burst stack, its figures drawn here from the records that came back."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import procs
from launch import pulumi_cli
from launch.netem_aws import NodeStatus, format_statuses, netem_on_stack
from launch.options import BurstLabOptions
from launch.ssm import read_secure_parameter
from launch.ssm_tunnel import ssm_port_forward
from launch.targets import LOCAL_RUN_TIMEOUT_S, Remote, fresh_results_folder, run_remote
from launch.watchdog import DEFAULT_STALL_TIMEOUT_S, Watchdog
from launch.workload import WorkloadRun, workload_run
from netem.lab import LabDescription, require_lab_support, two_site_lab
from netem.profile import Profile, load_profile
from stacks.outputs import BURST_TOKEN_PARAMETER, StackOutputsError, read_burst_outputs
from vocab.burst import SITE_CLOUD, SITE_ONPREM, site_of
from vocab.errors import FAILED_PREFIX, RunFailed
from vocab.ports import DASHBOARD_PORT
from workloads.burst.figures import draw, draw_sweep
from workloads.burst.options import BURST_SPEC, BurstOptions
from workloads.common.options import OptionError
from workloads.common.results import read_json
from workloads.common.storage import LocalStorage
from workloads.common.user_code import UserCodeError, function_of, parsed, top_level_names

PROJECT_DIR = pulumi_cli.PROJECT_DIR
LAB_BUCKET = "spotburst-burst"
AWS_SHARE = "/home/ec2-user/share/burst"
Show = Callable[[str], None]
Watch = Callable[[str, LabDescription], None]


def full_options(
    options: BurstOptions, profile: Profile, shaped_mbit: float, **launcher: Any
) -> BurstOptions:
    """The user's options with what the launcher sets: the profile and the rate tc was
    really given on the on-prem -> cloud link, and per target the lab, the folders, the
    bucket (checked again)."""
    return replace(
        options,
        bandwidth_mbit=shaped_mbit,
        profile=profile.name,
        **launcher,
    )


def profile_file(profile: Profile) -> Path | None:
    """The profile's file: a path, or the packaged seed file of a named profile."""
    if profile.source.startswith("builtin:"):
        return Path(str(resources.files("netem.profiles").joinpath(f"{profile.name}.json")))
    path = Path(profile.source)
    return path if path.is_file() else None


def check_fits_lab(options: BurstOptions, lab: BurstLabOptions) -> None:
    """Every worker node of the lab holds a task (each computes in the calibration, and Ray
    fails a task pinned to a node too small for it): one line naming the flag if not, before
    a lab starts. The driver checks again against the nodes it finds (a stack's too)."""
    if options.task_cpus is not None and options.task_cpus > min(lab.hpc_cpus, lab.cloud_cpus):
        raise OptionError("--task-cpus", f"{options.task_cpus} CPUs per task, more than a lab "
                          f"worker node has (hpc {lab.hpc_cpus}: --hpc-cpus, cloud "
                          f"{lab.cloud_cpus}: --cloud-cpus)")


def check_own(options: BurstOptions, here: bool = True) -> BurstOptions:
    """Your task file has the --function (one line naming the flag if not, before a lab
    starts): imported `here` (the local lab runs this environment), else read (a cluster
    installs its --requirements); its paths made absolute for a driver that runs elsewhere
    on this machine."""
    if options.script is None or options.inputs is None:
        return options
    if here:
        function_of(options.script, options.function, "--script", "--function")
        return replace(options, script=options.script.resolve(),
                       inputs=options.inputs.resolve())
    if options.function not in top_level_names(parsed(options.script, "--script")):
        raise UserCodeError(f"--function: {options.script} defines no {options.function!r}: "
                            "name the function with --function")
    return options


def run_burst(
    options: BurstOptions,
    bw: float,
    out: Path | None = None,
    stack: str | None = None,
    show: Show = print,
    watch: Watch | None = None,
    lab: BurstLabOptions | None = None,
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
    requirements: tuple[str, ...] = (),
) -> Path:
    """Run the burst workload (lab, or `stack`), draw its figures; returns the folder.
    The options checked themselves when they were made, and against the lab's node sizes
    and the task file here, before anything starts. `requirements` (--requirements, already
    checked installed here for the lab) are installed with a stack's job. A run that prints
    no progress for `stall_timeout_s` is stopped (RunStalled), and the lab with it."""
    lab = lab or BurstLabOptions()
    profile = load_profile(bw=bw)
    options = check_own(options, here=not stack)
    if not stack:
        check_fits_lab(options, lab)
    local_out = fresh_results_folder(out, "burst")
    if stack:
        run_on_stack(options, profile, local_out, stack, show, stall_timeout_s=stall_timeout_s,
                     requirements=requirements)
    else:
        require_lab_support()  # one line saying what the lab needs, before anything starts
        run_in_lab(options, lab, profile, local_out, show, watch, stall_timeout_s)
    draw(local_out)  # the driver has printed the table per scheduler already
    return local_out


def lab_driver_argv(
    lab: LabDescription, options: BurstOptions, profile: Profile, local_out: Path
) -> list[str]:
    """The driver's command line at the lab's on-prem site (the login node's place)."""
    env = [f"RAY_ADDRESS={lab.ray_address}"]
    s3: dict[str, Any] = {}
    if options.data == "s3":
        credentials = lab.s3_credentials
        env += [
            f"AWS_ACCESS_KEY_ID={credentials['aws_access_key_id']}",
            f"AWS_SECRET_ACCESS_KEY={credentials['aws_secret_access_key']}",
            f"AWS_DEFAULT_REGION={credentials['region_name']}",
        ]
        s3 = {"bucket": LAB_BUCKET, "s3_endpoint": lab.s3_endpoint_url,
              "s3_link_mbit": lab.rate_mbit.get(f"s3->{SITE_ONPREM}")}
    full = full_options(
        options,
        profile,
        lab.rate_mbit[f"{SITE_ONPREM}->{SITE_CLOUD}"],
        lab=lab.kind,
        target=f"lab:{lab.kind}",
        out=str(local_out),
        data_dir=str(Path(lab.storage[SITE_ONPREM]) / "burst-inputs"),
        stage_dir=str(Path(lab.temp_dir) / "stage"),
        profile_file=profile_file(profile),
        site_netns=tuple(f"{part}={name}" for part, name in lab.namespaces.items()) or None,
        **s3,
    )
    return ["env", *env, sys.executable, "-m", "workloads.burst", *BURST_SPEC.argv(full)]


def run_in_lab(
    options: BurstOptions,
    lab_options: BurstLabOptions,
    profile: Profile,
    local_out: Path,
    show: Show,
    watch: Watch | None = None,
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
) -> None:
    """Bring the lab up for the profile, run the driver on-prem, tear the lab down (also on
    Ctrl-C, failure or a stall)."""
    with two_site_lab(
        profile,
        cloud_nodes=lab_options.cloud_nodes,
        hpc_cpus=lab_options.hpc_cpus,
        cloud_cpus=lab_options.cloud_cpus,
    ) as lab:
        if options.data == "s3":  # the data is in the cloud's region before the run
            inputs_only = replace(options, inputs_only=True)
            run_driver(lab, lab_driver_argv(lab, inputs_only, profile, local_out), show,
                       watch, stall_timeout_s, site=SITE_CLOUD)
        run_driver(lab, lab_driver_argv(lab, options, profile, local_out), show, watch,
                   stall_timeout_s)
        write_shaping(local_out, {"lab": lab.kind, "profile": lab.profile, **lab.shaping})


def run_driver(
    lab: LabDescription, argv: list[str], show: Show, watch: Watch | None = None,
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S, site: str = SITE_ONPREM,
) -> None:
    """The driver at the lab's on-prem site (or `site`), its output shown line by line;
    `watch` sees every line too (the fault test kills a node on one). A driver that prints
    no progress for `stall_timeout_s` is killed and the run is RunStalled."""
    watchdog = Watchdog(stall_timeout_s)
    failed: list[str] = []

    def seen(line: str) -> None:
        watchdog.saw(line)
        show(line)
        if line.startswith(FAILED_PREFIX):
            failed.append(line.removeprefix(FAILED_PREFIX))
        if watch is not None:
            watch(line, lab)

    code, _ = procs.follow(lab.command(argv, site=site), seen, timeout_s=LOCAL_RUN_TIMEOUT_S,
                           stalled=lambda: watchdog.remaining_s() <= 0,
                           name="the burst driver", cwd=PROJECT_DIR)
    watchdog.check()
    if code != 0 and failed:
        raise RunFailed(f"{failed[-1]} (its traceback is above)")
    if code != 0:
        raise RunFailed(f"the burst driver exited with status {code} (its output is above)")


def write_shaping(local_out: Path, shaping: dict[str, Any]) -> None:
    """shaping.json: the shaping really applied while the run ran (the lab's tc rates, or
    every stack node's), next to the results."""
    local_out.mkdir(parents=True, exist_ok=True)
    (local_out / "shaping.json").write_text(json.dumps(shaping, indent=2) + "\n")


def stack_shaping(stack: str, statuses: list[NodeStatus]) -> dict[str, Any]:
    return {
        "lab": "aws",
        "stack": stack,
        "method": "tc htb+tbf on every burst node's egress to the other site (SSM)",
        "nodes": [
            {"role": s.role, "instance": s.instance_id, "interface": s.interface,
             "rate_mbit": s.rate_mbit, "delay_applied": s.delay_applied}
            for s in statuses
        ],
    }


def shaped_rate(statuses: list[NodeStatus]) -> float:
    """The one on-prem -> cloud rate every on-prem node was given."""
    rates = {s.rate_mbit for s in statuses
             if site_of(s.role) == SITE_ONPREM and s.rate_mbit is not None}
    if len(rates) != 1:
        raise RunFailed(f"the on-prem burst nodes were not shaped to one rate: {rates}")
    return rates.pop()


def stack_run(
    options: BurstOptions, profile: Profile, bucket: str, shaped_mbit: float,
    requirements: tuple[str, ...] = (),
) -> WorkloadRun:
    full = full_options(
        options,
        profile,
        shaped_mbit,
        lab="aws",
        data_dir=f"{AWS_SHARE}/inputs",
        stage_dir=f"{AWS_SHARE}/staged",
        profile_file=profile_file(profile),
        bucket=bucket if options.data == "s3" else None,
    )
    return workload_run("burst", "workloads.burst", BURST_SPEC, full, requirements)


def run_on_stack(
    options: BurstOptions,
    profile: Profile,
    local_out: Path,
    stack: str,
    show: Show,
    *,
    outputs: dict[str, Any] | None = None,
    ssm: Any = None,
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
    requirements: tuple[str, ...] = (),
) -> None:
    """Shape the burst nodes via SSM, submit through an SSM tunnel to the login node's
    dashboard with the cluster's token (its SSM SecureString), bring the results back
    through the bucket, then reset the shaping."""
    outputs = outputs if outputs is not None else pulumi_cli.stack_outputs(stack)
    burst = read_burst_outputs(outputs, stack)
    if burst.token_parameter is None:
        raise StackOutputsError(f"stack {stack!r} has no output {BURST_TOKEN_PARAMETER}; "
                                "redeploy it: the burst cluster runs with token auth")
    if ssm is None:
        from workloads.common.aws_client import aws_client

        ssm = aws_client("ssm", region=burst.region)
    statuses = netem_on_stack(stack, profile, outputs=outputs, ssm=ssm)
    show(format_statuses(statuses))
    try:
        if not all(status.ok for status in statuses):
            raise RunFailed("shaping the burst nodes failed (see above); nothing was run")
        run = stack_run(options, profile, burst.bucket_name, shaped_rate(statuses),
                        requirements)
        token = read_secure_parameter(ssm, burst.token_parameter)
        with ssm_port_forward(burst.login_instance, DASHBOARD_PORT, burst.region) as port:
            remote = Remote(
                address=f"http://127.0.0.1:{port}",
                label=f"stack:{stack}",
                bucket=burst.bucket_name,
                region=burst.region,
                token=token,
            )
            run_remote(run, remote, local_out, show, stall_timeout_s)
        write_shaping(local_out, stack_shaping(stack, statuses))
    finally:
        show(format_statuses(netem_on_stack(stack, None, outputs=outputs, ssm=ssm)))


def sweep_burst(
    options: BurstOptions,
    bandwidths: tuple[float, ...],
    out: Path | None = None,
    stack: str | None = None,
    show: Show = print,
    lab: BurstLabOptions | None = None,
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
    requirements: tuple[str, ...] = (),
) -> Path:
    """run-burst at each bandwidth into <out>/bw-<N>/, then makespan vs bandwidth."""
    for bw in bandwidths:
        load_profile(bw=bw)  # every value is checked before the first lab comes up
    options = check_own(options, here=not stack)
    if not stack:
        check_fits_lab(options, lab or BurstLabOptions())
    folder = fresh_results_folder(out, "burst-sweep")
    runs = []
    for bw in bandwidths:
        show(f"=== sweep: {bw:g} Mbit/s ===")
        run_folder = run_burst(options, bw, folder / f"bw-{bw:g}", stack, show, lab=lab,
                               stall_timeout_s=stall_timeout_s, requirements=requirements)
        runs.append(read_json(LocalStorage(run_folder), "summary.json"))
    (folder / "sweep.json").write_text(json.dumps(runs, indent=2) + "\n")
    draw_sweep(folder, runs)
    return folder
