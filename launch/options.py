"""The launcher's own flags (where a run goes, the local lab's shape), declared once in the
same way as a workload's options (workloads/common/options.py); `tasks.py` makes each run
task's flags from these specs and the workload's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from launch.requirements import REQUIREMENT_FORM, read_requirements
from launch.watchdog import DEFAULT_STALL_TIMEOUT_S
from netem.profile import MAX_BW_MBIT, MIN_BW_MBIT
from spotlab.options import SpotLabOptions
from vocab.names import NAME, shown
from workloads.common.options import (
    METADATA_KEY,
    OptionError,
    OptionSpec,
    check_fields,
    check_folder,
    option,
)

BW_HELP = (
    "cross-site bandwidth in Mbit/s: 30/50/80/100/150/200 pick the shipped profile of that "
    "name (31/55/83/106/160/210, the rates the Euro-Par 2024 burst paper set), any other "
    "positive number shapes to exactly that"
)
PROFILE_HELP = ("profile name (30m 50m 80m 100m 150m 200m) or a profile JSON file (format: "
                "docs/labs.md)")
STACK_HELP = "Pulumi stack name (its config is Pulumi.<stack>.yaml)"
ENDPOINT_HELP = "AWS endpoint URL (only for a local stand-in such as moto_server)"


def check_dashboard_address(address: str) -> None:
    """A Ray dashboard's address as the Jobs API takes it: http(s)://HOST[:PORT]."""
    parts = urlsplit(address)
    try:
        port_ok = parts.port is None or 0 < parts.port
    except ValueError:
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok \
            or parts.path.strip("/") or parts.query:
        raise OptionError("--address", f"expected http://HOST:PORT (a Ray dashboard), got "
                                       f"{address!r}")


def check_endpoint_url(flag: str, url: str) -> None:
    """An endpoint URL as boto3 takes it: http(s)://HOST[:PORT][/path]."""
    parts = urlsplit(url)
    try:
        port_ok = parts.port is None or 0 < parts.port
    except ValueError:
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise OptionError(flag, f"expected http(s)://HOST:PORT, got {shown(url)}")


def check_new_file(flag: str, path: Path) -> None:
    """`path` can be written as a file: not a folder, and no file where its folder would be."""
    if path.is_dir():
        raise OptionError(flag, f"{path} is a folder; give the file to write")
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise OptionError(flag, f"{parent} is a file, not a folder")


@dataclass(frozen=True, kw_only=True)
class ResultsFolderOptions:
    """Where a task that runs here writes its results folder."""

    out: Path | None = option(
        None, "local results folder (not set: a new folder under results/<workload>/)"
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.out is not None:
            check_folder("--out", self.out)


@dataclass(frozen=True, kw_only=True)
class StackTarget(ResultsFolderOptions):
    stack: str | None = option(
        None,
        "run on this Pulumi stack's deployed cluster instead (results come back through its "
        "bucket)",
        pattern=NAME,
    )


@dataclass(frozen=True, kw_only=True)
class WatchedTarget(StackTarget):
    """A target whose run is followed here, with the progress watchdog."""

    stall_timeout: float = option(
        DEFAULT_STALL_TIMEOUT_S,
        "seconds the run may print no progress before it is stopped (exit 1; Ray's own "
        "messages do not count as progress)",
        above=0.0,
        maximum=86_400.0,
    )


@dataclass(frozen=True, kw_only=True)
class TargetOptions(WatchedTarget):
    """Where a Ray workload runs: here (the default), `--address`, or `--stack`."""

    address: str | None = option(
        None,
        "Ray dashboard address of any cluster, e.g. http://HOST:8265 (runs as a Ray Job)",
    )
    verbose: bool = option(
        False, "also show Ray's and Ray Train's own log lines (otherwise kept in the results "
        "folder's ray-traces.log)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.address is not None:
            check_dashboard_address(self.address)
        if self.address and self.stack:
            raise OptionError("--address", "give --address or --stack, not both")


@dataclass(frozen=True, kw_only=True)
class BurstLabOptions:
    """The local two-site lab a burst run brings up (ignored with --stack)."""

    cloud_nodes: int = option(1, "local lab: number of cloud Ray nodes", minimum=1, maximum=8)
    hpc_cpus: int = option(2, "local lab: CPUs of the HPC worker node", minimum=1, maximum=64)
    cloud_cpus: int = option(2, "local lab: CPUs of each cloud node", minimum=1, maximum=64)

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class BurstRunTarget(WatchedTarget):
    bw: float = option(30.0, BW_HELP, minimum=MIN_BW_MBIT, maximum=MAX_BW_MBIT)


@dataclass(frozen=True, kw_only=True)
class BurstSweepTarget(WatchedTarget):
    bw: tuple[float, ...] = option(
        (30.0, 50.0, 100.0, 150.0, 200.0),
        "comma-separated cross-site bandwidths in Mbit/s, one run each",
        minimum=MIN_BW_MBIT,
        maximum=MAX_BW_MBIT,
    )


@dataclass(frozen=True, kw_only=True)
class RequirementsOptions:
    """What a user's own code needs installed: the one flag of every task that takes a
    user's file (run-elastic -f, run-burst -f, run-rl --env FILE:Class, run-doll's policy)."""

    requirements: Path | None = option(
        None,
        f"requirements file of your code's own imports: one `{REQUIREMENT_FORM}` a line "
        "(PEP 508 without URLs: no `name @ url`, git+, local paths or archives, pip options "
        "such as -r/-e/--index-url, or ${VAR}), # comments and blank lines; installed with "
        "the job on every node of an --address or --stack cluster; on the local lab each "
        "must be installed here already",
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.requirements is not None:
            read_requirements(self.requirements)  # each line checked before anything starts


TARGET_SPEC = OptionSpec(TargetOptions)
RESULTS_FOLDER_SPEC = OptionSpec(ResultsFolderOptions)
REQUIREMENTS_SPEC = OptionSpec(RequirementsOptions)
BURST_LAB_SPEC = OptionSpec(BurstLabOptions)
BURST_RUN_SPEC = OptionSpec(BurstRunTarget)
BURST_SWEEP_SPEC = OptionSpec(BurstSweepTarget)


def _lab_default(name: str, value: Any, help: str | None = None, *,
                 launcher: bool = False) -> Any:
    """A spot lab option with another default (same flag and rules; the same help unless
    `help` is given, for a default the lab's help would misdescribe); `launcher`: set by the
    launcher from another flag, not one of the task's own."""
    [spec_field] = [item for item in fields(SpotLabOptions) if item.name == name]
    metadata: Mapping[str, Any] = spec_field.metadata
    if help is not None or launcher:
        info = metadata[METADATA_KEY]
        metadata = {**metadata, METADATA_KEY: replace(
            info, help=help or info.help, launcher=launcher or info.launcher)}
    return field(default=value, metadata=metadata)


# An elastic run's preemptions come from its own schedule (`run-elastic --preempt-at`), one
# mechanism: the lab's Markov chain is off (α 1) unless --alpha asks for it. Then a chain
# step every 0.5 s (not the lab's 0.1 s) preempts a spot node about every 70 s at α 0.9: a
# worker-group restart takes tens of seconds on a loaded 2-core machine, and at 0.1 s the
# run spent its time restarting (measured).
ELASTIC_LAB_ALPHA = 1.0
ELASTIC_LAB_REFRESH_S = 0.5


@dataclass(frozen=True, kw_only=True)
class ElasticLabOptions(SpotLabOptions):
    """`run-elastic`'s local lab: the run's own schedule preempts; the lab's chain only with
    --alpha below 1, and then at a slower pace than the lab's."""

    alpha: float = _lab_default("alpha", ELASTIC_LAB_ALPHA)
    refresh: float = _lab_default(
        "refresh", ELASTIC_LAB_REFRESH_S,
        help="Markov model: seconds between chain steps (slower for elastic training than "
             "the lab's usual pace: a worker group's restart takes tens of seconds)")


ELASTIC_LAB_SPEC = OptionSpec(ElasticLabOptions)


RL_PREEMPT_EVERY = 8


@dataclass(frozen=True, kw_only=True)
class RlLabOptions(SpotLabOptions):
    """`run-rl`'s local lab: a learner node, no on-demand node, two spot nodes for the env
    runners and a third to take a preempted runner at once; the lab's market preempts
    nothing by itself (α = 1): the run's own schedule does, so a short run shows it."""

    on_demand: int = _lab_default("on_demand", 0)
    learner: int = _lab_default("learner", 1)
    alpha: float = _lab_default("alpha", 1.0)
    # the lab bills on-demand nodes at run-rl's --on-demand-price, the price of its cost
    on_demand_price: float = _lab_default("on_demand_price", 0.286, launcher=True)
    preempt_every: int = option(
        RL_PREEMPT_EVERY, "local lab: after every N-th training iteration, preempt the spot "
        "node of an env runner (a notice, a drain, a kill, a replacement node); 0: only the "
        "lab's own market (--alpha, --trace) preempts", minimum=0)
    lose_learner_at: int | None = option(
        None, "local lab: after this training iteration (once the env runners are all in "
        "service), the learner's node fails: killed without notice, not replaced (give "
        "--learner 2 for a node to resume on)", minimum=1)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.lose_learner_at is not None and self.learner < 2:
            raise OptionError("--lose-learner-at", f"needs --learner 2 or more (a node for the "
                              f"learner to resume on; the lost one is not replaced), got "
                              f"--learner {self.learner}")


RL_LAB_SPEC = OptionSpec(RlLabOptions)


# --- the flags of the tasks that run no workload ---------------------------------------------


@dataclass(frozen=True, kw_only=True)
class StackOptions:
    stack: str = option("dev", STACK_HELP, pattern=NAME)

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.stack.strip():
            raise OptionError("--stack", "expected a stack name, got ''")


@dataclass(frozen=True, kw_only=True)
class AwsStackOptions(StackOptions):
    endpoint_url: str | None = option(None, ENDPOINT_HELP)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.endpoint_url is not None:
            check_endpoint_url("--endpoint-url", self.endpoint_url)


@dataclass(frozen=True, kw_only=True)
class DeployOptions(AwsStackOptions):
    yes: bool = option(False, "skip the confirmation prompts (the budget's and Pulumi's)")


@dataclass(frozen=True, kw_only=True)
class OutputsOptions(StackOptions):
    show_secrets: bool = option(False, "also print secret outputs (the kubeconfig)")


@dataclass(frozen=True, kw_only=True)
class TestOptions:
    quick: bool = option(
        False, "local check in well under a minute: ruff and the tests that start no Ray, "
        "lab, moto_server or other process and compute little (pytest markers); no mypy. "
        "CI runs everything")


@dataclass(frozen=True, kw_only=True)
class FetchPricesOptions:
    instance_type: str = option("c5.xlarge", "EC2 instance type")
    region: str = option("us-east-1", "AWS region")
    days: float = option(90.0, "how many days back from now (EC2 keeps 90)", above=0.0,
                         maximum=90.0)
    out: Path | None = option(None, "JSON file to write (not set: "
                              "spot-prices/<type>_<region>_<days>d.json)")
    endpoint_url: str | None = option(None, ENDPOINT_HELP)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.out is not None:
            check_new_file("--out", self.out)
        if self.endpoint_url is not None:
            check_endpoint_url("--endpoint-url", self.endpoint_url)

    def target(self) -> Path:
        return self.out or Path(
            f"spot-prices/{self.instance_type}_{self.region}_{self.days:g}d.json")


@dataclass(frozen=True, kw_only=True)
class BandwidthOptions:
    """A cross-site link: a profile by name or file, or a bandwidth (exactly one)."""

    bw: float | None = option(None, BW_HELP, minimum=MIN_BW_MBIT, maximum=MAX_BW_MBIT)
    profile: str | None = option(None, PROFILE_HELP, path="file")

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class TwoSiteLabOptions(BandwidthOptions, BurstLabOptions):
    pass


@dataclass(frozen=True, kw_only=True)
class LabIdOptions:
    lab: str | None = option(None, "lab id (needed only when several labs are recorded)",
                             pattern=NAME)

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class MeasureLinkOptions(BandwidthOptions):
    out: Path | None = option(None, "folder for link.json (not set: "
                              "results/measure-link/<timestamp>)")
    seconds: float = option(4.0, "seconds of streaming per direction", above=0.0,
                            maximum=600.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.out is not None:
            check_folder("--out", self.out)


@dataclass(frozen=True, kw_only=True)
class NetemOptions(StackOptions, BandwidthOptions):
    reset: bool = option(False, "remove the shaping from every burst node instead")

    def __post_init__(self) -> None:
        check_fields(self)
        if self.reset and (self.bw is not None or self.profile is not None):
            raise OptionError("--reset", "give --reset alone, or --profile/--bw without it")


@dataclass(frozen=True, kw_only=True)
class SpotLabStatusOptions(LabIdOptions):
    json: bool = option(False, "print the status as JSON")


@dataclass(frozen=True, kw_only=True)
class SpotLabDownOptions(LabIdOptions):
    save_events: Path | None = option(None, "copy the lab's events.jsonl here before "
                                      "removing the lab (a file)")
    keep_data: bool = option(False, "keep the lab's shared folder (its staged data) even if "
                                    "the lab was started without --keep-data")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.save_events is not None:
            check_new_file("--save-events", self.save_events)


@dataclass(frozen=True, kw_only=True)
class FileTransferOptions:
    local: Path | None = option(None, "local file")
    name: str | None = option(None, "name in the service's file store")

    def __post_init__(self) -> None:
        check_fields(self)
        for flag, value in (("--local", self.local), ("--name", self.name)):
            if value is None or not str(value).strip():
                raise OptionError(flag, "required")


@dataclass(frozen=True, kw_only=True)
class DataTargetOptions:
    """Whose shared folder: a spot lab's, or a stack's shared file system."""

    lab: str | None = option(None, "spot lab id (not set: the only recorded lab)",
                             pattern=NAME)
    stack: str | None = option(None, "a Pulumi stack instead: its spot cluster's shared "
                                     "file system, through a RayCluster's head pod",
                               pattern=NAME)
    experiment: str | None = option(None, "with --stack: the RayCluster whose head pod is "
                                          "used (not set: the first deployed)", pattern=NAME)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.lab is not None and self.stack is not None:
            raise OptionError("--lab", "give --lab or --stack, not both")
        if self.experiment is not None and self.stack is None:
            raise OptionError("--experiment", "goes with --stack only")


def _required(flag: str, value: object) -> None:
    if value is None or not str(value).strip():
        raise OptionError(flag, "required")


@dataclass(frozen=True, kw_only=True)
class DataPutOptions(DataTargetOptions):
    local: Path | None = option(None, "local file to put in the shared folder")
    name: str | None = option(None, "its name there (not set: the file's own name)")

    def __post_init__(self) -> None:
        super().__post_init__()
        _required("--local", self.local)


@dataclass(frozen=True, kw_only=True)
class DataGetOptions(DataTargetOptions):
    name: str | None = option(None, "name in the shared folder")
    local: Path | None = option(None, "local file (or folder) to write it to")

    def __post_init__(self) -> None:
        super().__post_init__()
        _required("--name", self.name)
        _required("--local", self.local)


@dataclass(frozen=True, kw_only=True)
class DataRmOptions(DataTargetOptions):
    name: str | None = option(None, "name in the shared folder (a file or a folder)")

    def __post_init__(self) -> None:
        super().__post_init__()
        _required("--name", self.name)


@dataclass(frozen=True, kw_only=True)
class JobNameOptions:
    name: str | None = option(None, "job name")

    def __post_init__(self) -> None:
        check_fields(self)
        if not (self.name or "").strip():
            raise OptionError("--name", "required")


@dataclass(frozen=True, kw_only=True)
class JobStatusOptions:
    name: str | None = option(None, "job name (not set: every job)")
    json: bool = option(False, "print the status as JSON")


STACK_SPEC = OptionSpec(StackOptions)
AWS_STACK_SPEC = OptionSpec(AwsStackOptions)
DEPLOY_SPEC = OptionSpec(DeployOptions)
OUTPUTS_SPEC = OptionSpec(OutputsOptions)
TEST_SPEC = OptionSpec(TestOptions)
FETCH_PRICES_SPEC = OptionSpec(FetchPricesOptions)
TWO_SITE_LAB_SPEC = OptionSpec(TwoSiteLabOptions)
LAB_ID_SPEC = OptionSpec(LabIdOptions)
MEASURE_LINK_SPEC = OptionSpec(MeasureLinkOptions)
NETEM_SPEC = OptionSpec(NetemOptions)
SPOT_LAB_STATUS_SPEC = OptionSpec(SpotLabStatusOptions)
SPOT_LAB_DOWN_SPEC = OptionSpec(SpotLabDownOptions)
FILE_TRANSFER_SPEC = OptionSpec(FileTransferOptions)
JOB_NAME_SPEC = OptionSpec(JobNameOptions)
DATA_TARGET_SPEC = OptionSpec(DataTargetOptions)
DATA_PUT_SPEC = OptionSpec(DataPutOptions)
DATA_GET_SPEC = OptionSpec(DataGetOptions)
DATA_RM_SPEC = OptionSpec(DataRmOptions)
JOB_STATUS_SPEC = OptionSpec(JobStatusOptions)
