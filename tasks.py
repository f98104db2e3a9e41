"""spotburst's only command line: `invoke --list` shows every task.

Each task parses its flags, calls one function of `launch/` and prints the result.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterable
from typing import Any

from invoke import Context, Exit, Task, task

from launch import pulumi_cli
from launch.inference import INFER_TARGET_SPEC, InferTargetOptions
from launch.options import (
    BURST_LAB_SPEC,
    BURST_RUN_SPEC,
    BURST_SWEEP_SPEC,
    BW_HELP,
    ELASTIC_LAB_SPEC,
    TARGET_SPEC,
    BurstLabOptions,
    BurstRunTarget,
    BurstSweepTarget,
    TargetOptions,
)
from spotlab.options import LAB_SPEC, SpotLabOptions
from workloads.burst.options import BURST_SPEC, BurstOptions
from workloads.common.options import OptionError, OptionSpec
from workloads.doll.options import DOLL_SPEC, DollOptions
from workloads.elastic.options import ELASTIC_SPEC, SHORT_FLAGS, ElasticOptions
from workloads.inference.options import (
    DEMO_SPEC,
    INFERENCE_SPEC,
    JOB_SPEC,
    SERVICE_SPEC,
    DemoOptions,
    InferenceOptions,
    ServiceOptions,
)
from workloads.rl.options import RL_EVALUATE_SPEC, RL_SPEC, RlEvaluateOptions, RlOptions

STACK_HELP = "Pulumi stack name (config in Pulumi.<stack>.yaml)"
CREDENTIALS_HINT = "configure AWS credentials (`aws configure` or `aws sso login`)"


def _aws_errors() -> tuple[type[Exception], ...]:
    """What boto3 raises for missing credentials, an unreachable endpoint or a refusal."""
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


def _fail(error: BaseException) -> Exit:
    """The task's end for `error`: one line, exit code 2."""
    from botocore.exceptions import NoCredentialsError

    text = " ".join(str(error).split())
    if isinstance(error, NoCredentialsError):
        text = f"AWS: {text}; {CREDENTIALS_HINT}"
    return Exit(f"error: {text}", code=2)


def options_task(*specs: OptionSpec[Any]) -> Callable[[Callable[..., None]], Task]:
    """A task whose flags and help are the user options of `specs`; its body gets the
    context, then one checked options object per spec. A bad value ends the task with one
    line naming the flag, exit code 2, before anything starts."""
    flags = [flag for spec in specs for flag in spec.task_flags()]
    if len({dest for dest, _, _ in flags}) != len(flags):
        raise TypeError(f"the specs {[s.cls.__name__ for s in specs]} share a flag")

    def decorate(body: Callable[..., None]) -> Task:
        def run(c: Context, **given: Any) -> None:
            try:
                values = [
                    spec.from_text({dest: given.get(dest) for dest, _, _ in spec.task_flags()})
                    for spec in specs
                ]
            except OptionError as error:
                raise Exit(f"error: {error}", code=2) from None
            body(c, *values)

        parameters = [inspect.Parameter("c", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        keyword = inspect.Parameter.KEYWORD_ONLY
        parameters += [
            inspect.Parameter(dest, keyword, default=False if switch else None)
            for dest, switch, _ in flags
        ]
        run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        run.__name__ = run.__qualname__ = body.__name__
        run.__doc__ = body.__doc__
        run.__module__ = body.__module__
        # long flags only: a run task has more flags than letters for invoke's short ones
        return task(help={dest: text for dest, _, text in flags}, auto_shortflags=False)(run)

    return decorate


# --- infrastructure (Pulumi) -------------------------------------------------------------


def _pulumi(args: list[str], stack: str, warnings: Iterable[str] = ()) -> None:
    try:
        pulumi_cli.pulumi_executable()
    except pulumi_cli.PulumiCliMissing as missing:
        raise Exit(f"error: {missing}", code=2) from None
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    code = pulumi_cli.run_pulumi(args, stack)
    if code != 0:
        raise Exit(code=code)


@task(help={"stack": STACK_HELP})
def plan(c: Context, stack: str = "dev") -> None:
    """Show what a stack would create and its hourly cost, offline (no Pulumi CLI, no AWS)."""
    from launch.plan import plan as plan_stack
    from launch.plan import render_plan
    from stacks.fields import ConfigError

    try:
        planned = plan_stack(stack)
    except (FileNotFoundError, ConfigError) as error:
        raise _fail(error) from None
    print(render_plan(*planned))


@task(help={"stack": STACK_HELP})
def preview(c: Context, stack: str = "dev") -> None:
    """Preview a deployment with the Pulumi CLI (`pulumi preview`)."""
    _pulumi(["preview"], stack)


@task(help={"stack": STACK_HELP, "yes": "Skip the budget prompt and Pulumi's confirmation",
            "endpoint_url": "AWS endpoint URL for the preflight (only for a local stand-in)"})
def up(c: Context, stack: str = "dev", yes: bool = False, endpoint_url: str | None = None) -> None:
    """Deploy a stack (`pulumi up`) after the preflight passes (credentials, region, Pulumi
    login, kubectl, Service Quotas at maximum scale, the stack config) and the hourly cost at
    minimum and maximum scale is accepted; exit 2 listing each failed check with its fix."""
    from launch.account.budget import confirm_budget
    from launch.account.deploy_gate import GateError, gate_in_subprocess

    print(f"up: preflight of stack {stack!r} (planned offline in a subprocess)...",
          file=sys.stderr)
    try:
        gate = gate_in_subprocess(stack, endpoint_url)
    except GateError as error:
        raise Exit(f"error: {error}", code=2) from None
    if not gate.passed:
        raise Exit(gate.report, code=2)
    print(gate.report)
    assert gate.hourly_min is not None and gate.hourly_max is not None
    if not confirm_budget(gate.hourly_min, gate.hourly_max, yes=yes):
        raise Exit("not deployed: the budget was not confirmed", code=1)
    _pulumi(["up", *(["--yes"] if yes else [])], stack)


@task(help={"stack": STACK_HELP, "yes": "Skip Pulumi's confirmation prompt",
            "endpoint_url": "AWS endpoint URL for the leftover listing (only for a stand-in)"})
def destroy(c: Context, stack: str = "dev", yes: bool = False,
            endpoint_url: str | None = None) -> None:
    """Delete everything a stack created (`pulumi destroy`), then list what of it is still
    billable in its region (exit 1 naming each leftover with the command that deletes it)."""
    _pulumi(["destroy", *(["--yes"] if yes else [])], stack)
    _report_leftovers(stack, endpoint_url)


@task(help={"stack": STACK_HELP, "show_secrets": "Also print secret outputs (the kubeconfig)"})
def outputs(c: Context, stack: str = "dev", show_secrets: bool = False) -> None:
    """Print a deployed stack's outputs (what the run tasks use)."""
    _pulumi(["stack", "output", *(["--show-secrets"] if show_secrets else [])], stack)


def _ci_only_markers() -> list[str]:
    """The pytest markers registered in pyproject.toml: tests that start Ray, a lab, moto or
    other processes, or compute for seconds. `test --quick` leaves them to CI."""
    import tomllib
    from pathlib import Path

    config = tomllib.loads((Path(__file__).parent / "pyproject.toml").read_text())
    return [line.split(":")[0] for line in config["tool"]["pytest"]["ini_options"]["markers"]]


@task(help={"quick": "Local check in well under a minute: ruff and the tests that start no Ray, "
                     "lab, moto_server or other process and compute little (pytest markers); "
                     "no mypy. CI runs everything"})
def test(c: Context, quick: bool = False) -> None:
    """Run the checks CI runs: ruff, mypy, then pytest (every test)."""
    python = sys.executable
    c.run(f"{python} -m ruff check .", echo=True)
    if quick:
        c.run(f"{python} -m pytest -m 'not ({' or '.join(_ci_only_markers())})'", echo=True)
        return
    c.run(f"{python} -m mypy", echo=True)
    # two workers, a test module on one (its module fixtures built once): most tests wait on
    # processes (Ray nodes, labs) more than they compute; the slowest 30 listed for the budget
    c.run(f"{python} -m pytest -n 2 --dist loadfile --durations=30", echo=True)


# --- DOLL ---------------------------------------------------------------------------------


@options_task(DOLL_SPEC, TARGET_SPEC)
def run_doll(c: Context, options: DollOptions, target: TargetOptions) -> None:
    """Run the DOLL experiment (local Ray by default, --address or --stack); draws figures."""
    from launch.doll import run_doll as run
    from launch.port_forward import SecretUnreadable
    from launch.ray_jobs import JobFailed
    from launch.tunnel import TunnelFailed

    failures: tuple[type[Exception], ...] = (
        ValueError, TunnelFailed, JobFailed, SecretUnreadable, pulumi_cli.PulumiError,
        *_aws_errors(),
    )
    try:
        folder = run(options, target)
    except failures as error:
        raise _fail(error) from None
    except RuntimeError as error:  # the workload failed; its own output said why
        raise Exit(f"error: {error}", code=1) from None
    print(f"results and figures in {folder}")


# --- distributed RL on spot ----------------------------------------------------------------


@options_task(RL_SPEC, LAB_SPEC, TARGET_SPEC)
def run_rl(c: Context, options: RlOptions, lab_options: SpotLabOptions,
           target: TargetOptions) -> None:
    """Run RLlib SAC with its learner on an on-demand node and env runners on spot nodes (a
    new local spot lab by default, --address or --stack); draws the reward figures."""
    from launch.port_forward import SecretUnreadable
    from launch.ray_jobs import JobFailed
    from launch.rl import run_rl as run
    from launch.tunnel import TunnelFailed
    from procs import ProcessNotReady

    failures: tuple[type[Exception], ...] = (
        ValueError, TunnelFailed, JobFailed, SecretUnreadable, pulumi_cli.PulumiError,
        *_aws_errors(),
    )
    try:
        folder = run(options, target, lab_options)
    except failures as error:
        raise _fail(error) from None
    except ProcessNotReady as error:
        raise Exit(f"error: the spot lab did not start: {error}", code=1) from None
    except RuntimeError as error:  # the workload failed; its own output said why
        raise Exit(f"error: {error}", code=1) from None
    print(f"results and figures in {folder}")


@options_task(RL_EVALUATE_SPEC)
def rl_evaluate(c: Context, options: RlEvaluateOptions) -> None:
    """Run deterministic episodes of a checkpoint an RL run saved (its best by default), on
    this machine without Ray: mean, spread and each episode's return."""
    from workloads.rl.evaluate_checkpoint import evaluate

    try:
        evaluate(options, lambda line: print(line, flush=True))
    except OptionError as error:  # a bad --run or --checkpoint
        raise _fail(error) from None


@task(help={
    "instance_type": "EC2 instance type (default c5.xlarge)",
    "region": "AWS region (default us-east-1)",
    "days": "How many days back from now (default 90)",
    "out": "JSON file to write (default spot-prices/<type>_<region>_<days>d.json)",
    "endpoint_url": "EC2 endpoint URL (only for a local stand-in such as moto_server)",
})
def fetch_prices(c: Context, instance_type: str = "c5.xlarge", region: str = "us-east-1",
                 days: float = 90, out: str | None = None,
                 endpoint_url: str | None = None) -> None:
    """Download a spot price trace (boto3, paginated) in the format run-doll --trace reads."""
    from pathlib import Path

    from launch.spot_prices import fetch_spot_prices

    target = Path(out or f"spot-prices/{instance_type}_{region}_{days:g}d.json")
    failures: tuple[type[Exception], ...] = (ValueError, RuntimeError, *_aws_errors())
    try:
        count = fetch_spot_prices(instance_type, region, days, target, endpoint_url)
    except failures as error:
        raise _fail(error) from None
    print(f"wrote {count} records to {target}")


# --- network emulation and the local two-site lab -----------------------------------------

PROFILE_HELP = "Profile name (30m 50m 80m 100m 150m 200m) or a seed-format JSON file"


def _netem_errors() -> tuple[type[Exception], ...]:
    from netem.lab import LabNotFound, LabUnavailable
    from netem.profile import ProfileError
    from stacks.outputs import StackOutputsError

    return (ProfileError, LabNotFound, LabUnavailable, StackOutputsError, ValueError,
            pulumi_cli.PulumiError, *_aws_errors())


@task(help={"bw": BW_HELP, "profile": PROFILE_HELP,
            "cloud_nodes": "Number of cloud Ray nodes (1-8)",
            "hpc_cpus": "CPUs the HPC worker node offers to Ray",
            "cloud_cpus": "CPUs each cloud node offers to Ray"})
def lab_up(c: Context, bw: str | None = None, profile: str | None = None,
           cloud_nodes: int = 1, hpc_cpus: int = 2, cloud_cpus: int = 2) -> None:
    """Bring the local two-site lab up (needs root and ip netns) and leave it running;
    prints its description (JSON)."""
    import json

    from launch.lab import lab_up as start

    try:
        lab = start(bw, profile, cloud_nodes, hpc_cpus, cloud_cpus)
    except _netem_errors() as error:
        raise _fail(error) from None
    print(json.dumps(lab.to_dict(), indent=2))
    print(f"lab {lab.lab_id} is up; run the driver on-prem with the prefix in "
          f"site_prefixes.onprem; remove it with `invoke lab-down --lab {lab.lab_id}`",
          file=sys.stderr)


@task(help={"lab": "Lab id (needed only when several labs are up)"})
def lab_down(c: Context, lab: str | None = None) -> None:
    """Remove a lab: its processes, namespaces and temp dir, exactly what lab-up created."""
    from launch.lab import lab_down as stop

    try:
        removed = stop(lab)
    except _netem_errors() as error:
        raise _fail(error) from None
    print("\n".join(f"removed {item}" for item in removed))


@task(help={"lab": "Lab id (needed only when several labs are up)"})
def lab_status(c: Context, lab: str | None = None) -> None:
    """Show a lab's description and which of its processes and namespaces are alive."""
    from launch.lab import lab_report

    try:
        print(lab_report(lab))
    except _netem_errors() as error:
        raise _fail(error) from None


@task(help={"bw": BW_HELP, "profile": PROFILE_HELP,
            "out": "Directory for link.json (default results/measure-link/<timestamp>)",
            "seconds": "Seconds of streaming per direction"})
def measure_link(c: Context, bw: str | None = None, profile: str | None = None,
                 out: str | None = None, seconds: float = 4.0) -> None:
    """Bring a lab up, measure its shaped link both ways with a TCP stream, tear it down."""
    import time

    from launch.lab import measure

    out = out or f"results/measure-link/{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        _, table = measure(bw, profile, out, seconds)
    except _netem_errors() as error:
        raise _fail(error) from None
    print(table)
    print(f"wrote {out}/link.json")


@task(help={"stack": STACK_HELP, "bw": BW_HELP, "profile": PROFILE_HELP,
            "reset": "Remove the shaping from every burst node instead"})
def netem(c: Context, stack: str = "dev", bw: str | None = None, profile: str | None = None,
          reset: bool = False) -> None:
    """Apply a bandwidth profile on the burst stack's login, HPC and cloud nodes via SSM."""
    from launch.netem_aws import format_statuses, netem_on_stack
    from netem.profile import load_profile

    try:
        if reset and (bw or profile):
            raise ValueError("give --reset alone, or a profile/--bw without --reset")
        statuses = netem_on_stack(stack, None if reset else load_profile(profile, bw))
    except _netem_errors() as error:
        raise _fail(error) from None
    print(format_statuses(statuses))
    if not all(status.ok for status in statuses):
        raise Exit("error: a node failed (see above); the others were reset", code=1)


# --- burst ----------------------------------------------------------------------------------


def _burst_errors() -> tuple[type[Exception], ...]:
    from launch.targets import TargetError

    return (*_netem_errors(), TargetError, RuntimeError)


@options_task(BURST_SPEC, BURST_RUN_SPEC, BURST_LAB_SPEC)
def run_burst(c: Context, options: BurstOptions, target: BurstRunTarget,
              lab: BurstLabOptions) -> None:
    """Burst workload at --bw Mbit/s: local two-site lab (default) or --stack; a table per
    scheduler, results and figures in --out."""
    from launch.burst import run_burst as run

    try:
        folder = run(options, target.bw, target.out, target.stack, lab=lab)
    except _burst_errors() as error:
        raise _fail(error) from None
    print(f"results and figures: {folder}")


@options_task(BURST_SPEC, BURST_SWEEP_SPEC, BURST_LAB_SPEC)
def sweep_burst(c: Context, options: BurstOptions, target: BurstSweepTarget,
                lab: BurstLabOptions) -> None:
    """run-burst at each bandwidth, then a makespan-vs-bandwidth figure."""
    from launch.burst import sweep_burst as sweep

    try:
        folder = sweep(options, target.bw, target.out, target.stack, lab=lab)
    except _burst_errors() as error:
        raise _fail(error) from None
    print(f"sweep results and makespan_vs_bandwidth.png: {folder}")


# --- AWS account: preflight and leftovers (launch/account) ------------------------------------

ENDPOINT_HELP = "AWS endpoint URL (only for a local stand-in such as moto_server)"


@task(help={"stack": STACK_HELP, "endpoint_url": ENDPOINT_HELP})
def preflight(c: Context, stack: str = "dev", endpoint_url: str | None = None) -> None:
    """Check AWS credentials, region, Pulumi login, kubectl and the Service Quotas the stack
    needs at maximum scale; exit 2 listing each failed check with its fix."""
    from launch.account.checks import failures, render_preflight
    from launch.account.stack import preflight_stack

    print(f"preflight: planning stack {stack!r} offline, then asking AWS...", file=sys.stderr)
    try:
        results, region = preflight_stack(stack, endpoint_url)
    except FileNotFoundError as error:
        raise Exit(f"error: {error}", code=2) from None
    report = render_preflight(results, stack, region)
    if failures(results):
        raise Exit(report, code=2)
    print(report)


@task(help={"stack": STACK_HELP, "endpoint_url": ENDPOINT_HELP})
def leftovers(c: Context, stack: str = "dev", endpoint_url: str | None = None) -> None:
    """List what of a stack is still billable in its region (tagged with the stack or named
    after its EKS cluster), each with the AWS CLI command that deletes it; exit 1 if any."""
    _report_leftovers(stack, endpoint_url)


def _report_leftovers(stack: str, endpoint_url: str | None) -> None:
    from launch.account.leftovers import render_leftovers
    from launch.account.stack import leftovers_for_stack
    from stacks.fields import ConfigError

    print(f"leftovers: listing what stack {stack!r} may have left in its region...",
          file=sys.stderr)
    try:
        report = leftovers_for_stack(stack, endpoint_url)
    except (FileNotFoundError, ConfigError) as error:
        raise Exit(f"error: {error}", code=2) from None
    if not report.clean:
        raise Exit(render_leftovers(report), code=1)
    print(render_leftovers(report))


# --- the local spot lab (spot nodes that get a notice, drain, die and are replaced) ---------

LAB_ID_HELP = "Spot lab id (needed only when several spot labs are up)"


def _spot_lab_errors() -> tuple[type[Exception], ...]:
    from spotlab import SpotLabConfigError, SpotLabNotFound

    return (SpotLabConfigError, SpotLabNotFound, ValueError)


@options_task(LAB_SPEC)
def spot_lab_up(c: Context, lab_options: SpotLabOptions) -> None:
    """Start a local spot lab and leave it running (its supervisor preempts spot nodes)."""
    import json

    from procs import ProcessNotReady
    from spotlab import start_lab

    try:
        lab = start_lab(lab_options.config())
    except _spot_lab_errors() as error:
        raise Exit(f"error: {error}", code=2) from None
    except ProcessNotReady as error:  # removed again; the message ends with the log's tail
        raise Exit(f"error: the spot lab did not start: {error}", code=1) from None
    print(json.dumps({"lab_id": lab.lab_id, "ray_address": lab.ray_address,
                      "dashboard_url": lab.dashboard_url, "driver_env": lab.driver_env,
                      "events": str(lab.events_path)}, indent=2))
    print(f"spot lab {lab.lab_id} is up; watch it with `invoke spot-lab-status --lab "
          f"{lab.lab_id}`, remove it with `invoke spot-lab-down --lab {lab.lab_id}`",
          file=sys.stderr)


@task(auto_shortflags=False,
      help={"lab": LAB_ID_HELP, "json": "Print the status as JSON"})
def spot_lab_status(c: Context, lab: str | None = None, json: bool = False) -> None:
    """Show a spot lab's nodes, its recorded events, measured delays and its bill so far."""
    import json as json_module

    from spotlab import lab_status
    from spotlab.report import format_status, summary

    try:
        status = lab_status(lab)
    except _spot_lab_errors() as error:
        raise Exit(f"error: {error}", code=2) from None
    if json:
        print(json_module.dumps({**status, "measured": summary(status["events"])}, indent=2))
    else:
        print(format_status(status))


@task(auto_shortflags=False,
      help={"lab": LAB_ID_HELP,
            "save_events": "Copy the lab's events.jsonl here before removing the lab"})
def spot_lab_down(c: Context, lab: str | None = None, save_events: str | None = None) -> None:
    """Remove a spot lab: its supervisor, nodes, temp dir and state, exactly what it created."""
    from pathlib import Path

    from spotlab import stop_lab

    try:
        removed = stop_lab(lab, save_events=Path(save_events) if save_events else None)
    except _spot_lab_errors() as error:
        raise Exit(f"error: {error}", code=2) from None
    print("\n".join(f"removed {item}" for item in removed))


# --- the inference cluster (seed 002): a service on Ray and its commands --------------------

JOB_NAME_HELP = "Job name"


def _inference_errors() -> tuple[type[Exception], ...]:
    from launch.port_forward import SecretUnreadable
    from launch.tunnel import TunnelFailed
    from procs import ProcessNotReady
    from spotlab import SpotLabConfigError, SpotLabNotFound
    from stacks.outputs import StackOutputsError
    from workloads.inference.endpoint import ServiceError

    return (ServiceError, SpotLabConfigError, SpotLabNotFound, ProcessNotReady,
            ConnectionError, TunnelFailed, SecretUnreadable, StackOutputsError,
            pulumi_cli.PulumiError, *_aws_errors())


def _inference(action: Callable[[], Any]) -> Any:
    try:
        return action()
    except _inference_errors() as error:
        raise _fail(error) from None


@options_task(SERVICE_SPEC, LAB_SPEC, INFER_TARGET_SPEC)
def infer_up(c: Context, options: ServiceOptions, lab_options: SpotLabOptions,
             target: InferTargetOptions) -> None:
    """Bring the inference service up (a coordinator and --workers workers) on a new local
    spot lab, on the Ray cluster at --address, or on a deployed stack's inference
    RayCluster (--stack); it runs until infer-down."""
    from launch.inference import infer_up as up
    from launch.ray_jobs import JobFailed
    from launch.targets import TargetError

    lab = lab_options.config(dashboard=False)
    failures: tuple[type[Exception], ...] = (JobFailed, TargetError, *_inference_errors())
    try:
        record = up(options, lab, address=target.address, stack=target.stack)
    except failures as error:
        raise _fail(error) from None
    where = f"spot lab {record.lab_id}" if record.lab_id else record.ray_address
    print(f"inference service up on {where}; file store {record.store}")


@task
def infer_down(c: Context) -> None:
    """Stop the inference service (workers, coordinator) and the spot lab infer-up started."""
    from launch.inference import infer_down as down
    from launch.ray_jobs import JobFailed
    from launch.targets import TargetError

    failures: tuple[type[Exception], ...] = (JobFailed, TargetError, *_inference_errors())
    try:
        print("\n".join(down()))
    except failures as error:
        raise _fail(error) from None


@task(help={"local": "Local file to upload", "name": "Name in the store"})
def files_put(c: Context, local: str, name: str) -> None:
    """Put a local file into the service's file store as NAME."""
    from pathlib import Path

    from launch.inference import files_put as put

    print(_inference(lambda: put(Path(local), name)))


@task(help={"name": "Name in the store", "local": "Local file to write"})
def files_get(c: Context, name: str, local: str) -> None:
    """Get file NAME from the service's file store into LOCAL."""
    from pathlib import Path

    from launch.inference import files_get as get

    print(_inference(lambda: get(name, Path(local))))


@task
def files_ls(c: Context) -> None:
    """List the files in the service's file store."""
    from launch.inference import files_ls as ls

    print("\n".join(_inference(ls)) or "(no files)")


@options_task(DEMO_SPEC)
def files_demo(c: Context, options: DemoOptions) -> None:
    """Write the demo's model, test set and labels (small_model.npz, small_testset.npy,
    small_label.npy: a small network trained on scikit-learn's digits, its held-out digits
    and their labels) into --dir, ready for files-put (file formats: docs/inference.md)."""
    from launch.inference import files_demo as demo

    print("\n".join(_inference(lambda: demo(options))))


@task
def members(c: Context) -> None:
    """The service's Ray nodes and workers, with their state."""
    from launch.inference import command, format_members

    print(format_members(_inference(lambda: command("members"))))


@task(auto_shortflags=False,
      help={"name": JOB_NAME_HELP, **{d: h for d, _, h in JOB_SPEC.task_flags()}})
def job_add(c: Context, name: str, model: str | None = None, testset: str | None = None,
            labels: str | None = None, batch_size: str | None = None) -> None:
    """Add an inference job: a model, a test set and its labels from the store, split into
    sub-jobs of --batch-size queries; it stays idle until job-start."""
    from launch.inference import job_add as add

    try:
        job = JOB_SPEC.from_text({"model": model, "testset": testset, "labels": labels,
                                  "batch_size": batch_size})
        job.files()
    except OptionError as error:
        raise Exit(f"error: {error}", code=2) from None
    answer = _inference(lambda: add(name, job))
    print(f"job {name} added: {answer['queries']} queries in {answer['sub_jobs']} sub-jobs")


@task(help={"name": JOB_NAME_HELP})
def job_start(c: Context, name: str) -> None:
    """Start (or resume) a job."""
    from launch.inference import command

    answer = _inference(lambda: command("job_start", name))
    print(f"job {name} running: {answer['remaining_sub_jobs']} sub-jobs to go")


@task(help={"name": JOB_NAME_HELP})
def job_stop(c: Context, name: str) -> None:
    """Stop a running job: it returns to idle, and job-start goes on where it stopped."""
    from launch.inference import command

    answer = _inference(lambda: command("job_stop", name))
    print(f"job {name} stopped (idle, {answer['done_sub_jobs']} sub-jobs done)")


@task(help={"name": JOB_NAME_HELP})
def job_remove(c: Context, name: str) -> None:
    """Remove a job that is not running (its results stay in the store)."""
    from launch.inference import command

    _inference(lambda: command("job_remove", name))
    print(f"job {name} removed")


@task(help={"name": "Job name (default: every job)", "json": "Print the status as JSON"})
def job_status(c: Context, name: str | None = None, json: bool = False) -> None:
    """Jobs' state, query rate (window), processed count, latency mean/std/median/p90/p95/p99,
    assigned workers, progress and accuracy."""
    import json as json_module

    from launch.inference import command, format_status

    answer = _inference(lambda: command("job_status", name) if name else command("job_status"))
    print(json_module.dumps(answer, indent=2) if json else format_status(answer))


@options_task(INFERENCE_SPEC, LAB_SPEC, TARGET_SPEC)
def run_inference(c: Context, options: InferenceOptions, lab_options: SpotLabOptions,
                  target: TargetOptions) -> None:
    """The inference experiment in one command: the service up on a new spot lab (or
    --address/--stack), models and test sets into its store, two (--jobs 3: three) jobs of
    different cost with fair share, two busy workers and the coordinator killed together
    (--fail-workers, --fail-coordinator), every answer checked, results and figures
    (docs/inference.md)."""
    from launch.inference import run_inference as run
    from launch.port_forward import SecretUnreadable
    from launch.ray_jobs import JobFailed
    from launch.targets import TargetError
    from launch.tunnel import TunnelFailed

    failures: tuple[type[Exception], ...] = (
        ValueError, TunnelFailed, JobFailed, SecretUnreadable, TargetError,
        pulumi_cli.PulumiError, *_inference_errors())
    try:
        folder = run(options, lab_options.config(), target.address, target.stack, target.out)
    except failures as error:
        raise _fail(error) from None
    except RuntimeError as error:  # the workload failed; its own output said why
        raise Exit(f"error: {error}", code=1) from None
    print(f"results and figures in {folder}")


# --- elastic training on spot (workloads/elastic) ------------------------------------------


def _with_short_flags(task_object: Task, short_flags: dict[str, str]) -> Task:
    """Give some of a task's long flags a one-letter alias (`-f` for `--script`)."""
    by_dest = {flag.removeprefix("--").replace("-", "_"): short.removeprefix("-")
               for short, flag in short_flags.items()}
    long_names = task_object.arg_opts

    def arg_opts(name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        opts = long_names(name, default, taken_names)
        if name in by_dest:
            opts["names"].append(by_dest[name])
        return opts

    task_object.arg_opts = arg_opts  # type: ignore[method-assign]
    return task_object


@options_task(ELASTIC_SPEC, ELASTIC_LAB_SPEC, TARGET_SPEC)
def run_elastic(c: Context, options: ElasticOptions, lab_options: SpotLabOptions,
                target: TargetOptions) -> None:
    """Elastic training on spot: `-f SCRIPT -m MAX -- SCRIPT_ARGS` (no -f: the digits CNN) on
    Ray Train V2; a notice checkpoints at once, the run rescales and resumes losing no step.
    Local default: a fresh spot lab (--spot/--on-demand...); --address or --stack."""
    from dataclasses import replace

    from launch.elastic import run_elastic as run
    from launch.port_forward import SecretUnreadable
    from launch.ray_jobs import JobFailed
    from launch.targets import TargetError
    from launch.tunnel import TunnelFailed
    from workloads.elastic.entry import ScriptError

    failures: tuple[type[Exception], ...] = (
        ValueError, TargetError, ScriptError, TunnelFailed, JobFailed, SecretUnreadable,
        pulumi_cli.PulumiError, *_spot_lab_errors(), *_aws_errors(),
    )
    try:
        if c.remainder:
            options = replace(options, script_args=c.remainder)
        folder = run(options, target, lab_options)
    except failures as error:
        raise _fail(error) from None
    except RuntimeError as error:  # the workload failed; its own output said why
        raise Exit(f"error: {error}", code=1) from None
    print(f"results and figure in {folder}")


run_elastic = _with_short_flags(run_elastic, SHORT_FLAGS)
