"""spotburst's only command line: `invoke --list` shows every task.

Every task is declared the same way: its flags come from option specs
(`workloads/common/options.py`), its body calls one function of `launch/` (or a lab) and
prints the result. Every task ends a failure the same way (`vocab/errors.py`): a user's
error is one line naming the flag, key or file (exit 2), a failed run one line (exit 1), an
interrupt (Ctrl-C or SIGTERM) one line saying what was removed (exit 130).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from invoke import Context, Exit, Task, task

from launch.inference import INFER_TARGET_SPEC, InferTargetOptions
from launch.invoke_parser import OPTIONAL_POSITIONALS, TypedTask, adapt_invoke_parser
from launch.options import (
    AWS_STACK_SPEC,
    BURST_LAB_SPEC,
    BURST_RUN_SPEC,
    BURST_SWEEP_SPEC,
    DATA_GET_SPEC,
    DATA_PUT_SPEC,
    DATA_RM_SPEC,
    DATA_TARGET_SPEC,
    DEPLOY_SPEC,
    ELASTIC_LAB_SPEC,
    FETCH_PRICES_SPEC,
    FILE_TRANSFER_SPEC,
    JOB_NAME_SPEC,
    JOB_STATUS_SPEC,
    LAB_ID_SPEC,
    MEASURE_LINK_SPEC,
    NETEM_SPEC,
    OUTPUTS_SPEC,
    REQUIREMENTS_SPEC,
    RESULTS_FOLDER_SPEC,
    RL_LAB_SPEC,
    SPOT_LAB_DOWN_SPEC,
    SPOT_LAB_STATUS_SPEC,
    STACK_SPEC,
    TARGET_SPEC,
    TEST_SPEC,
    TWO_SITE_LAB_SPEC,
    AwsStackOptions,
    BurstLabOptions,
    BurstRunTarget,
    BurstSweepTarget,
    DataGetOptions,
    DataPutOptions,
    DataRmOptions,
    DataTargetOptions,
    DeployOptions,
    FetchPricesOptions,
    FileTransferOptions,
    JobNameOptions,
    JobStatusOptions,
    LabIdOptions,
    MeasureLinkOptions,
    NetemOptions,
    OutputsOptions,
    RequirementsOptions,
    ResultsFolderOptions,
    RlLabOptions,
    SpotLabDownOptions,
    SpotLabStatusOptions,
    StackOptions,
    TargetOptions,
    TestOptions,
    TwoSiteLabOptions,
)
from launch.preempt import PREEMPT_SPEC, PreemptOptions
from procs import sigterm_raises_interrupt
from procs.journal import take_removed
from spotlab.options import LAB_SPEC, SpotLabOptions
from vocab.errors import RunFailed, UserError, one_line
from workloads.burst.options import BURST_SPEC, BurstOptions
from workloads.burst.options import SHORT_FLAGS as BURST_SHORT_FLAGS
from workloads.common.options import OptionSpec
from workloads.doll.options import DOLL_SPEC, SIM_SPEC, DollOptions, SimOptions
from workloads.elastic.options import ELASTIC_SPEC, SHORT_FLAGS, ElasticOptions
from workloads.inference.options import (
    DEMO_SPEC,
    INFERENCE_SPEC,
    JOB_SPEC,
    SERVICE_SPEC,
    DemoOptions,
    InferenceOptions,
    JobOptions,
    ServiceOptions,
)
from workloads.rl.options import RL_EVALUATE_SPEC, RL_SPEC, RlEvaluateOptions, RlOptions

INTERRUPTED_EXIT_CODE = 130

adapt_invoke_parser()


def _ended(error: BaseException) -> Exit:
    """How a task ends for `error`: one line, the exit code its kind says."""
    from launch.errors import project_error

    if isinstance(error, KeyboardInterrupt):
        removed = take_removed()
        what = "; ".join(removed) if removed else "nothing was left running"
        return Exit(f"interrupted: removed {what}", code=INTERRUPTED_EXIT_CODE)
    known = error if isinstance(error, UserError | RunFailed) else None
    if known is None and isinstance(error, Exception):
        known = project_error(error)
    if known is None:
        raise error  # a bug: its traceback is what a report needs
    return Exit(f"error: {one_line(known)}", code=known.exit_code)


def cli_task(
    *specs: OptionSpec[Any],
    positional: tuple[str, ...] = (),
    short_flags: dict[str, str] | None = None,
    optional: tuple[str, ...] = (),
) -> Callable[[Callable[..., None]], Task]:
    """A task whose flags and help are the user options of `specs`; its body gets the
    context, then one checked options object per spec. A bad value ends the task with one
    line naming the flag, exit code 2, before anything starts; any other end is `_ended`'s.
    `positional` flags may also be given by position (the last of them may be `optional`);
    `short_flags` maps `-f` to `--script`."""
    flags = [flag for spec in specs for flag in spec.task_flags()]
    if len({dest for dest, _, _ in flags}) != len(flags):
        raise TypeError(f"the specs {[s.cls.__name__ for s in specs]} share a flag")

    def decorate(body: Callable[..., None]) -> Task:
        def run(c: Context, **given: Any) -> None:
            try:
                with sigterm_raises_interrupt():
                    values = [
                        spec.from_text(
                            {dest: given.get(dest) for dest, _, _ in spec.task_flags()})
                        for spec in specs
                    ]
                    body(c, *values)
            except (Exception, KeyboardInterrupt) as error:
                raise _ended(error) from None

        parameters = [inspect.Parameter("c", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
        parameters += [
            inspect.Parameter(dest, keyword, default=False if switch else None)
            for dest, switch, _ in sorted(flags, key=lambda flag: _place(flag[0], positional))
        ]
        run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        run.__name__ = run.__qualname__ = body.__name__
        run.__doc__ = body.__doc__
        run.__module__ = body.__module__
        # long flags only: a run task has more flags than letters for invoke's short ones
        made = task(help={dest: text for dest, _, text in flags}, auto_shortflags=False,
                    positional=list(positional), klass=TypedTask)(run)
        made.value_types = {dest: word for spec in specs
                            for dest, word in spec.task_types().items()}
        made.renamed_flags = {old: new for spec in specs for old, new in spec.renamed.items()}
        if optional:
            OPTIONAL_POSITIONALS[made.name.replace("_", "-")] = set(optional)
        return _with_short_flags(made, short_flags) if short_flags else made

    return decorate


def _place(dest: str, positional: tuple[str, ...]) -> int:
    """Positional flags first, in their given order; the rest keep theirs (a stable sort)."""
    return positional.index(dest) if dest in positional else len(positional)


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


def _say(line: str) -> None:
    print(line, flush=True)


def _results(workload: str, folder: Path, what: str) -> None:
    """How a run task ends: its headline numbers (launch/headline.py), then its folder."""
    from launch.headline import headline_of

    table = headline_of(workload, folder)
    if table:
        print(table)
    print(f"{what} {folder}", flush=True)


def _verbose(target: TargetOptions) -> AbstractContextManager[None]:
    """Ray's and Ray Train's own log lines on the terminal too, with --verbose."""
    from launch.ray_jobs import ray_log_lines_shown

    return ray_log_lines_shown(target.verbose)


# --- infrastructure (Pulumi) -------------------------------------------------------------


def _pulumi(args: list[str], stack: str) -> None:
    from launch import pulumi_cli

    pulumi_cli.pulumi_executable()
    code = pulumi_cli.run_pulumi(args, stack)
    if code != 0:
        raise Exit(code=code)


@cli_task(STACK_SPEC)
def plan(c: Context, options: StackOptions) -> None:
    """Show what a stack would create and its hourly cost, offline (no Pulumi CLI, no AWS)."""
    from launch.plan import plan as plan_stack
    from launch.plan import render_plan

    print(render_plan(*plan_stack(options.stack)))


@cli_task(STACK_SPEC)
def preview(c: Context, options: StackOptions) -> None:
    """Preview a deployment with the Pulumi CLI (`pulumi preview`)."""
    _pulumi(["preview"], options.stack)


@cli_task(DEPLOY_SPEC)
def up(c: Context, options: DeployOptions) -> None:
    """Deploy a stack (`pulumi up`) once its preflight passes and its hourly cost is accepted.

    The preflight checks credentials, region, Pulumi login, the tools (kubectl, the AWS CLI and
    its Session Manager plugin), Service Quotas at maximum scale and the stack config; each
    failed check is one line with its fix (exit 2)."""
    from launch.account.budget import confirm_budget
    from launch.account.deploy_gate import gate_in_subprocess

    print(f"up: preflight of stack {options.stack!r} (planned offline in a subprocess)...",
          file=sys.stderr)
    gate = gate_in_subprocess(options.stack, options.endpoint_url)
    if not gate.passed:
        raise Exit(gate.report, code=2)
    print(gate.report)
    assert gate.hourly_min is not None and gate.hourly_max is not None
    if not confirm_budget(gate.hourly_min, gate.hourly_max, yes=options.yes):
        raise Exit("not deployed: the budget was not confirmed", code=1)
    _pulumi(["up", *(["--yes"] if options.yes else [])], options.stack)


@cli_task(DEPLOY_SPEC)
def destroy(c: Context, options: DeployOptions) -> None:
    """Delete everything a stack created (`pulumi destroy`), then list what is still billable.

    Each leftover is named with the command that deletes it (exit 1 if any)."""
    _pulumi(["destroy", *(["--yes"] if options.yes else [])], options.stack)
    _report_leftovers(options)


@cli_task(OUTPUTS_SPEC)
def outputs(c: Context, options: OutputsOptions) -> None:
    """Print a deployed stack's outputs (what the run tasks use)."""
    _pulumi(["stack", "output", *(["--show-secrets"] if options.show_secrets else [])],
            options.stack)


def _ci_only_markers() -> list[str]:
    """The pytest markers registered in pyproject.toml: tests that start Ray, a lab, moto or
    other processes, or compute for seconds. `test --quick` leaves them to CI."""
    import tomllib
    from pathlib import Path

    config = tomllib.loads((Path(__file__).parent / "pyproject.toml").read_text())
    return [line.split(":")[0] for line in config["tool"]["pytest"]["ini_options"]["markers"]]


@cli_task(TEST_SPEC)
def test(c: Context, options: TestOptions) -> None:
    """Run the checks CI runs: ruff, mypy, then pytest (every test).

    Needs root and network namespaces (`ip netns`), as the two-site lab's tests do; without
    them it stops before anything runs (`--quick` needs neither)."""
    python = sys.executable
    if not options.quick:
        from netem.lab.netns import netns_supported

        supported, reason = netns_supported()
        if not supported:
            raise Exit(f"error: invoke test runs the two-site lab's tests, which need root and "
                       f"network namespaces ({reason}): run it as root, or `invoke test "
                       f"--quick` for the checks that need neither", code=2)
    c.run(f"{python} -m ruff check .", echo=True)
    if options.quick:
        c.run(f"{python} -m pytest -m 'not ({' or '.join(_ci_only_markers())})'", echo=True)
        return
    c.run(f"{python} -m mypy", echo=True)
    # two workers, a test module on one (its module fixtures built once): most tests wait on
    # processes (Ray nodes, labs) more than they compute; modules in collection order (the
    # longest first: tests/conftest.py); the slowest 30 listed for the budget
    c.run(f"{python} -m pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=30",
          echo=True)


# --- AWS account: preflight and leftovers (launch/account) ----------------------------------


@cli_task(AWS_STACK_SPEC)
def preflight(c: Context, options: AwsStackOptions) -> None:
    """Check AWS credentials, region, Pulumi login, the tools and the quotas a stack needs.

    The tools are those the deploy and run tasks call: the Pulumi CLI, kubectl (EKS
    experiments), the AWS CLI and its Session Manager plugin (burst). Quotas are checked at
    the stack's maximum scale; each failed check is one line with its fix (exit 2)."""
    from launch.account.checks import failures, render_preflight
    from launch.account.stack import preflight_stack

    print(f"preflight: planning stack {options.stack!r} offline, then asking AWS...",
          file=sys.stderr)
    results, region = preflight_stack(options.stack, options.endpoint_url)
    report = render_preflight(results, options.stack, region)
    if failures(results):
        raise Exit(report, code=2)
    print(report)


@cli_task(AWS_STACK_SPEC)
def leftovers(c: Context, options: AwsStackOptions) -> None:
    """List what of a stack is still billable in its region, each with its delete command.

    A resource counts when it is tagged with the stack or named after its EKS cluster
    (exit 1 if any is left)."""
    _report_leftovers(options)


def _report_leftovers(options: AwsStackOptions) -> None:
    from launch.account.leftovers import render_leftovers
    from launch.account.stack import leftovers_for_stack

    print(f"leftovers: listing what stack {options.stack!r} may have left in its region...",
          file=sys.stderr)
    report = leftovers_for_stack(options.stack, options.endpoint_url)
    if not report.clean:
        raise Exit(render_leftovers(report), code=1)
    print(render_leftovers(report))


@cli_task(PREEMPT_SPEC)
def preempt(c: Context, options: PreemptOptions) -> None:
    """Interrupt running spot instances of a deployed stack's pool now, through AWS FIS.

    Each of --count starts the pool's experiment template: FIS picks a running spot instance,
    sends it a rebalance recommendation and the two-minute notice, then interrupts it."""
    from launch.preempt import format_started
    from launch.preempt import preempt as interrupt

    print(format_started(interrupt(options)))


# --- DOLL -----------------------------------------------------------------------------------


@cli_task(DOLL_SPEC, TARGET_SPEC, REQUIREMENTS_SPEC)
def run_doll(c: Context, options: DollOptions, target: TargetOptions,
             requirements: RequirementsOptions) -> None:
    """Run the DOLL experiment and draw its figures (local Ray by default, or a cluster)."""
    from launch.doll import run_doll as run

    with _verbose(target):
        folder = run(options, target, requirements=requirements)
    _results("doll", folder, "results and figures in")


@cli_task(SIM_SPEC, RESULTS_FOLDER_SPEC)
def sim_doll(c: Context, options: SimOptions, results: ResultsFolderOptions) -> None:
    """Replay DOLL's policies on the lab's engine without Ray, over whole capacity traces.

    Every policy × capacity trace × start point × seed; runs.jsonl, summary.json (mean cost
    ratio and deadline-miss rate with 95 % intervals), provenance and figures."""
    from launch.doll import sim_doll as simulate

    folder = simulate(options, results.out, _say)
    _results("sim-doll", folder, "results and figures in")


@cli_task(FETCH_PRICES_SPEC)
def fetch_prices(c: Context, options: FetchPricesOptions) -> None:
    """Download a spot price trace (boto3, paginated) in the format run-doll --trace reads."""
    from launch.spot_prices import fetch_spot_prices

    target = options.target()
    count = fetch_spot_prices(options.instance_type, options.region, options.days, target,
                              options.endpoint_url)
    print(f"wrote {count} records to {target}")


# --- distributed RL on spot ----------------------------------------------------------------


@cli_task(RL_SPEC, RL_LAB_SPEC, TARGET_SPEC, REQUIREMENTS_SPEC)
def run_rl(c: Context, options: RlOptions, lab_options: RlLabOptions,
           target: TargetOptions, requirements: RequirementsOptions) -> None:
    """Run RLlib SAC, its learner on demand and its env runners on spot nodes, with figures.

    Local default: a new spot lab; or --address / --stack."""
    from launch.rl import run_rl as run

    with _verbose(target):
        folder = run(options, target, lab_options, requirements=requirements)
    _results("rl", folder, "results and figures in")


@cli_task(RL_EVALUATE_SPEC)
def rl_evaluate(c: Context, options: RlEvaluateOptions) -> None:
    """Run deterministic episodes of a checkpoint an RL run saved, here and without Ray.

    Its best checkpoint by default; prints the mean, the spread and each episode's return."""
    from workloads.rl.evaluate_checkpoint import evaluate

    evaluate(options, _say)


# --- network emulation and the local two-site lab -----------------------------------------


@cli_task(TWO_SITE_LAB_SPEC)
def lab_up(c: Context, options: TwoSiteLabOptions) -> None:
    """Bring the local two-site lab up and leave it running; prints its description (JSON).

    Needs root and `ip netns`."""
    import json

    from launch.lab import lab_up as start

    lab = start(options)
    print(json.dumps(lab.to_dict(), indent=2))
    print(f"lab {lab.lab_id} is up; run the driver on-prem with the prefix in "
          f"site_prefixes.onprem; remove it with `invoke lab-down --lab {lab.lab_id}`",
          file=sys.stderr)


@cli_task(LAB_ID_SPEC)
def lab_down(c: Context, options: LabIdOptions) -> None:
    """Remove a two-site lab: exactly the processes, namespaces and temp dir lab-up created."""
    from launch.lab import lab_down as stop

    print("\n".join(f"removed {item}" for item in stop(options.lab)))


@cli_task(LAB_ID_SPEC)
def lab_status(c: Context, options: LabIdOptions) -> None:
    """Show a two-site lab's description and which of its processes and namespaces live."""
    from launch.lab import lab_report

    print(lab_report(options.lab))


@cli_task(MEASURE_LINK_SPEC)
def measure_link(c: Context, options: MeasureLinkOptions) -> None:
    """Bring a two-site lab up, measure its shaped paths both ways, and tear it down.

    The shaped paths: the site link, and the on-prem site's path to S3."""
    from launch.lab import measure

    folder, table = measure(options)
    print(table)
    print(f"wrote {folder / 'link.json'}")


@cli_task(NETEM_SPEC)
def netem(c: Context, options: NetemOptions) -> None:
    """Apply a bandwidth profile on the burst stack's login, HPC and cloud nodes via SSM."""
    from launch.netem_aws import format_statuses, netem_on_stack
    from netem.profile import load_profile

    profile = None if options.reset else load_profile(options.profile, options.bw)
    statuses = netem_on_stack(options.stack, profile)
    print(format_statuses(statuses))
    if not all(status.ok for status in statuses):
        raise Exit("error: a node failed (see above); the others were reset", code=1)


# --- burst ----------------------------------------------------------------------------------


@cli_task(BURST_SPEC, BURST_RUN_SPEC, BURST_LAB_SPEC, REQUIREMENTS_SPEC,
          short_flags=BURST_SHORT_FLAGS)
def run_burst(c: Context, options: BurstOptions, target: BurstRunTarget,
              lab: BurstLabOptions, requirements: RequirementsOptions) -> None:
    """Run the burst workload at --bw Mbit/s with both schedulers, with tables and figures.

    `-f TASKS.py --function NAME --inputs DIR`: your own function on every entry of DIR.
    Local default: the two-site lab; or --stack. See docs/burst.md."""
    from launch.burst import run_burst as run
    from launch.requirements import user_requirements

    folder = run(options, target.bw, target.out, target.stack, lab=lab,
                 stall_timeout_s=target.stall_timeout,
                 requirements=user_requirements(requirements.requirements, not target.stack))
    _results("burst", folder, "results and figures:")


@cli_task(BURST_SPEC, BURST_SWEEP_SPEC, BURST_LAB_SPEC, REQUIREMENTS_SPEC,
          short_flags=BURST_SHORT_FLAGS)
def sweep_burst(c: Context, options: BurstOptions, target: BurstSweepTarget,
                lab: BurstLabOptions, requirements: RequirementsOptions) -> None:
    """Run run-burst at each bandwidth, then draw makespan against bandwidth."""
    from launch.burst import sweep_burst as sweep
    from launch.requirements import user_requirements

    folder = sweep(options, target.bw, target.out, target.stack, lab=lab,
                   stall_timeout_s=target.stall_timeout,
                   requirements=user_requirements(requirements.requirements, not target.stack))
    print(f"sweep results and makespan_vs_bandwidth.png: {folder}")


# --- the local spot lab (spot nodes that get a notice, drain, die and are replaced) ---------


@cli_task(LAB_SPEC)
def spot_lab_up(c: Context, lab_options: SpotLabOptions) -> None:
    """Start a local spot lab and leave it running; its supervisor preempts its spot nodes."""
    import json

    from spotlab import start_lab

    lab = start_lab(lab_options.config())
    print(json.dumps({"lab_id": lab.lab_id, "ray_address": lab.ray_address,
                      "dashboard_url": lab.dashboard_url, "driver_env": lab.driver_env,
                      "events": str(lab.events_path)}, indent=2))
    print(f"spot lab {lab.lab_id} is up; watch it with `invoke spot-lab-status --lab "
          f"{lab.lab_id}`, remove it with `invoke spot-lab-down --lab {lab.lab_id}`",
          file=sys.stderr)


@cli_task(SPOT_LAB_STATUS_SPEC)
def spot_lab_status(c: Context, options: SpotLabStatusOptions) -> None:
    """Show a spot lab's nodes, its recorded events, measured delays and its bill so far."""
    import json

    from spotlab import lab_status
    from spotlab.report import format_status, summary

    status = lab_status(options.lab)
    if options.json:
        print(json.dumps({**status, "measured": summary(status["events"])}, indent=2))
    else:
        print(format_status(status))


@cli_task(SPOT_LAB_DOWN_SPEC)
def spot_lab_down(c: Context, options: SpotLabDownOptions) -> None:
    """Remove a spot lab: exactly the supervisor, nodes, temp dir and state it created."""
    from spotlab import stop_lab

    print("\n".join(f"removed {item}"
                    for item in stop_lab(options.lab, save_events=options.save_events,
                                         keep_data=options.keep_data or None)))


# --- the shared data folder (a lab's, or a stack's EFS) ---------------------------------------


@contextmanager
def _shared_folder(target: DataTargetOptions) -> Iterator[Any]:
    from launch.shared_data import lab_folder, stack_folder

    if target.stack is not None:
        with stack_folder(target.stack, target.experiment) as folder:
            yield folder
    else:
        yield lab_folder(target.lab)


@cli_task(DATA_PUT_SPEC, positional=("local", "name"), optional=("name",))
def data_put(c: Context, options: DataPutOptions) -> None:
    """Put a local file into the shared folder every node sees (SPOTBURST_SHARED), once.

    The folder is a spot lab's (--lab) or a stack's EFS file system (--stack)."""
    from launch.shared_data import put

    assert options.local is not None
    with _shared_folder(options) as folder:
        print(put(folder, options.local, options.name))


@cli_task(DATA_TARGET_SPEC)
def data_ls(c: Context, options: DataTargetOptions) -> None:
    """List the shared folder: each file or folder with its size, and the space left."""
    from launch.shared_data import format_listing, listing

    with _shared_folder(options) as folder:
        print(format_listing(folder, listing(folder)))


@cli_task(DATA_GET_SPEC, positional=("name", "local"))
def data_get(c: Context, options: DataGetOptions) -> None:
    """Get a file from the shared folder into a local file (or folder)."""
    from launch.shared_data import get

    assert options.name is not None and options.local is not None
    with _shared_folder(options) as folder:
        print(get(folder, options.name, options.local))


@cli_task(DATA_RM_SPEC, positional=("name",))
def data_rm(c: Context, options: DataRmOptions) -> None:
    """Remove a file or a folder from the shared folder."""
    from launch.shared_data import remove

    assert options.name is not None
    with _shared_folder(options) as folder:
        print(remove(folder, options.name))


# --- the inference cluster: a service on Ray and its commands -------------------------------


@cli_task(SERVICE_SPEC, LAB_SPEC, INFER_TARGET_SPEC)
def infer_up(c: Context, options: ServiceOptions, lab_options: SpotLabOptions,
             target: InferTargetOptions) -> None:
    """Bring the inference service up and leave it running until infer-down.

    A coordinator and --workers workers, on a new local spot lab, on the Ray cluster at
    --address, or on a deployed stack's inference RayCluster (--stack)."""
    from launch.inference import infer_up as start

    lab = lab_options.config(dashboard=False)
    record = start(options, lab, address=target.address, stack=target.stack)
    where = f"spot lab {record.lab_id}" if record.lab_id else record.ray_address
    print(f"inference service up on {where}; file store {record.store}")


@cli_task()
def infer_down(c: Context) -> None:
    """Stop the inference service (workers, coordinator) and the spot lab infer-up started."""
    from launch.inference import infer_down as down

    print("\n".join(down()))


@cli_task(FILE_TRANSFER_SPEC, positional=("local", "name"))
def files_put(c: Context, options: FileTransferOptions) -> None:
    """Put a local file into the service's file store under a name."""
    from launch.inference import files_put as put

    assert options.local is not None and options.name is not None
    print(put(options.local, options.name))


@cli_task(FILE_TRANSFER_SPEC, positional=("name", "local"))
def files_get(c: Context, options: FileTransferOptions) -> None:
    """Get a file from the service's file store into a local file."""
    from launch.inference import files_get as get

    assert options.local is not None and options.name is not None
    print(get(options.name, options.local))


@cli_task()
def files_ls(c: Context) -> None:
    """List the files in the service's file store."""
    from launch.inference import files_ls as ls

    print("\n".join(ls()) or "(no files)")


@cli_task(DEMO_SPEC)
def files_demo(c: Context, options: DemoOptions) -> None:
    """Write the demo's models, test sets and labels into a folder, ready for files-put.

    small_model.onnx, small_testset.npy, small_label.npy: a small ReLU network trained on
    scikit-learn's digits (64 pixels in), its held-out digits and their labels; large_*: a
    small convolutional network on the 1x8x8 image, hundreds of times costlier per
    query (file formats: docs/inference.md)."""
    from launch.inference import files_demo as demo

    print("\n".join(demo(options)))


@cli_task()
def members(c: Context) -> None:
    """List the service's Ray nodes and workers, with their state."""
    from launch.inference import command, format_members

    print(format_members(command("members")))


@cli_task(JOB_NAME_SPEC, JOB_SPEC, positional=("name",))
def job_add(c: Context, name: JobNameOptions, job: JobOptions) -> None:
    """Add an inference job (a model, a test set and its labels from the store), idle.

    It is split into sub-jobs of --batch-size queries and waits for job-start."""
    from launch.inference import job_add as add

    assert name.name is not None
    job.files()
    answer = add(name.name, job)
    print(f"job {name.name} added: {answer['queries']} queries in {answer['sub_jobs']} sub-jobs")


@cli_task(JOB_NAME_SPEC, positional=("name",))
def job_start(c: Context, options: JobNameOptions) -> None:
    """Start (or resume) a job."""
    from launch.inference import command

    answer = command("job_start", options.name)
    print(f"job {options.name} running: {answer['remaining_sub_jobs']} sub-jobs to go")


@cli_task(JOB_NAME_SPEC, positional=("name",))
def job_stop(c: Context, options: JobNameOptions) -> None:
    """Stop a running job: it goes back to idle, and job-start resumes it where it stopped."""
    from launch.inference import command

    answer = command("job_stop", options.name)
    print(f"job {options.name} stopped (idle, {answer['done_sub_jobs']} sub-jobs done)")


@cli_task(JOB_NAME_SPEC, positional=("name",))
def job_remove(c: Context, options: JobNameOptions) -> None:
    """Remove a job that is not running, with its parts and output in the store."""
    from launch.inference import command

    command("job_remove", options.name)
    print(f"job {options.name} removed")


@cli_task(JOB_STATUS_SPEC)
def job_status(c: Context, options: JobStatusOptions) -> None:
    """Show each job's state, query rate, latency percentiles, workers, progress and accuracy."""
    import json

    from launch.inference import command, format_status

    answer = command("job_status", options.name) if options.name else command("job_status")
    print(json.dumps(answer, indent=2) if options.json else format_status(answer))


@cli_task(INFERENCE_SPEC, LAB_SPEC, TARGET_SPEC)
def run_inference(c: Context, options: InferenceOptions, lab_options: SpotLabOptions,
                  target: TargetOptions) -> None:
    """Run the inference experiment in one command: fair share, failover, results, figures.

    The service comes up on a new spot lab (or --address/--stack), models and test sets go
    into its store, two (--jobs 3: three) jobs of different cost run under fair share, two
    busy workers and the coordinator are killed together (--fail-workers,
    --fail-coordinator), every answer is checked (docs/inference.md)."""
    from launch.inference import run_inference as run

    with _verbose(target):
        folder = run(options, lab_options.config(), target)
    _results("inference", folder, "results and figures in")


# --- elastic training on spot (workloads/elastic) ------------------------------------------


@cli_task(ELASTIC_SPEC, ELASTIC_LAB_SPEC, TARGET_SPEC, REQUIREMENTS_SPEC,
          short_flags=SHORT_FLAGS)
def run_elastic(c: Context, options: ElasticOptions, lab_options: SpotLabOptions,
                target: TargetOptions, requirements: RequirementsOptions) -> None:
    """Run a Ray Train V2 script elastic on spot nodes; a notice loses no step.

    `-f SCRIPT [--function NAME] [--config JSON] -m MAX -- SCRIPT_ARGS` (no -f: the digits
    CNN demo); a script calling checkpoint_due() checkpoints the step it is on at a notice.
    Local default: a fresh spot lab and three scheduled preemptions (--preempt-at);
    --preset paper: the original's scale; or --address / --stack. See docs/elastic.md.
    Three flags interrupt spot nodes, and they add up: --preempt-at (the run's own points,
    in steps or training seconds; spot lab only), --preemptions (the lab's clock, at:T,...
    after its start; on --stack through AWS FIS) and --alpha below 1 (the lab's Markov
    chain; 1, the default here, never preempts)."""
    from dataclasses import replace

    from launch.elastic import run_elastic as run

    if c.remainder:
        options = replace(options, script_args=c.remainder)
    with _verbose(target):
        folder = run(options, target, lab_options, requirements=requirements)
    _results("elastic", folder, "results and figure in")
