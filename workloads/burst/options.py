"""The burst workload's options: the one spec its argparse, `invoke run-burst` /
`sweep-burst` and the launcher's command lines are made from (see
workloads/common/options.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vocab.names import NAME, shown
from workloads.burst.cpu import parse_site_namespaces
from workloads.burst.scheduling.policy import STAGE_AHEAD_BYTES
from workloads.common.options import OptionError, OptionSpec, check_fields, option

WORKLOADS = ("image", "param-server")
DATA = ("nfs", "s3")
SCHEDULERS = ("default", "data-aware")
LABS = ("netns", "aws", "local")
SHAPED_LABS = ("netns", "aws")
"""Where the launcher shaped the site link to --bandwidth-mbit (tc); elsewhere nothing was."""
SIZES = "sized for a few minutes at 30 Mbit/s"
MAX_SIDE = 8192
MB = 1 << 20
GB = 1 << 30
MAX_INPUT_PIXEL_BYTES = 16 * GB
"""Inputs are generated on the HPC site's disk and cross the shaped link: 16 GB is hours."""
DEFAULT_CALIBRATION_TASKS = 3
OWN = "own"
"""The workload of a run of the user's own task function (--script)."""
CALLABLE = "callable"
"""The workload of burst_map: a function of the researcher's own driver (workloads.burst.api)."""
SHORT_FLAGS = {"-f": "--script"}
MAX_OWN_INPUTS = 10_000


@dataclass(frozen=True, kw_only=True)
class BurstOptions:
    workload: str = option(
        "image",
        "image (per-image transform) or param-server (per-directory gradients)",
        choices=WORKLOADS,
    )
    script: Path | None = option(
        None,
        "your task file: every entry of --inputs is one task, which calls its --function "
        "with the path where that input is on the node that runs it (replaces --workload)",
    )
    function: str = option(
        "process", "--script: the task function, called as function(path); its return "
        "(JSON) is the task's result"
    )
    inputs: Path | None = option(
        None, "--script: a folder whose every entry (a file or a folder) is one task's input",
    )
    data: str = option(
        "nfs", "nfs (inputs on the on-prem file system) or s3 (inputs in a bucket)", choices=DATA
    )
    schedulers: tuple[str, ...] = option(
        SCHEDULERS,
        "default (plain Ray placement), data-aware (streaming) or both, run in that order",
        flag="--scheduler",
        choices=SCHEDULERS,
        aliases={"both": SCHEDULERS},
    )
    images: int = option(48, f"image workload: number of images, {SIZES}", minimum=1,
                        maximum=10_000)
    image_side: int = option(
        2800, f"image workload: side of each generated image in pixels, {SIZES}", minimum=64,
        maximum=MAX_SIDE,
    )
    directories: int = option(
        24, f"param-server workload: directories, one task each, {SIZES}", minimum=1,
        maximum=10_000,
    )
    images_per_directory: int = option(
        20,
        "param-server workload: images per directory, sized so the makespan's lower bound "
        "is ≥ 20 s at every shipped bandwidth (start-up and learning costs do not dominate)",
        minimum=1,
        maximum=1000,
    )
    ps_image_side: int = option(
        1200, "param-server workload: side of each input image in pixels", minimum=64,
        maximum=MAX_SIDE,
    )
    task_cpus: int | None = option(
        None, "CPUs each task reserves (not set: the smallest worker node's CPUs)", minimum=1
    )
    stage_ahead_mb: int = option(
        STAGE_AHEAD_BYTES // MB,
        "data-aware: the most input data (MB) a node holds staged ahead of its compute, "
        "while it computes; its next task's input always moves",
        minimum=1,
        maximum=1 << 20,
    )
    s3_prefix: str = option("burst-inputs", "s3: key prefix of the inputs (names joined by "
                            f"'/', each {NAME.rule})")
    inputs_cache: str | None = option(
        None,
        "a local directory of generated inputs kept across runs: inputs with the same "
        "parameters are copied from it instead of generated again (generated there first)",
        path="folder",
    )
    seed: int = option(0, "seed of the generated inputs", minimum=0)
    calibration_tasks: int | None = option(
        None,
        "tasks every worker node computes (after one untimed) before each scheduler's run, "
        "its data in place and no transfer beside it: per site the mean compute time over "
        "these passes and the default run's tasks gives the lower bound both schedulers are "
        f"measured against (not set: {DEFAULT_CALIBRATION_TASKS}, or the run's tasks less "
        "the untimed one when it has fewer)",
        minimum=1,
        maximum=100,
    )
    data_dir: str = option(
        "burst-data",
        "nfs: the on-prem directory holding the inputs (generated if absent)",
        launcher=True,
    )
    stage_dir: str = option(
        "burst-stage",
        "directory on each node where moved data is staged before compute",
        launcher=True,
    )
    bucket: str | None = option(None, "s3: the bucket holding the inputs", launcher=True)
    s3_endpoint: str | None = option(None, "S3 endpoint URL (a local S3)", launcher=True)
    lab: str = option("local", "where this runs", choices=LABS, launcher=True)
    bandwidth_mbit: float | None = option(
        None, "the cross-site link rate (Mbit/s), for the lower bound", above=0.0, launcher=True
    )
    s3_link_mbit: float | None = option(
        None, "s3: the rate (Mbit/s) the on-prem site's path to the bucket was shaped to (the "
        "bucket sits at the cloud's end), for the lower bound; not set: not shaped",
        above=0.0, launcher=True,
    )
    profile: str = option("none", "the bandwidth profile's name", launcher=True)
    profile_file: Path | None = option(None, "the profile file (provenance)", launcher=True)
    out: str | None = option(None, "results folder or s3://bucket/prefix", launcher=True)
    results_to_log: bool = option(
        False, "also print the results as one line of the log", launcher=True
    )
    inputs_only: bool = option(
        False, "write the inputs to the data location and exit (the lab writes a bucket's "
        "inputs from the cloud site before the run: the data is in the cloud's region)",
        launcher=True,
    )
    target: str = option("local", "label of the target (provenance)", launcher=True)
    site_netns: tuple[str, ...] | None = option(
        None,
        "SITE=NETNS pairs: the CPU time of each site's processes (those in that network "
        "namespace) is measured per run (the local lab)",
        launcher=True,
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if not all(NAME.matches(part) for part in self.s3_prefix.split("/")):
            raise OptionError("--s3-prefix", f"expected names joined by '/', each {NAME.rule}, "
                              f"got {shown(self.s3_prefix)}")
        self._check_own()
        try:
            parse_site_namespaces(self.site_netns)
        except ValueError as error:
            raise OptionError("--site-netns", str(error)) from None
        if self.input_pixel_bytes > MAX_INPUT_PIXEL_BYTES:
            flag = "--images" if self.workload == "image" else "--directories"
            raise OptionError(flag, f"the inputs would hold {self.input_pixel_bytes / GB:.0f} GB "
                              f"of pixels, more than the {MAX_INPUT_PIXEL_BYTES / GB:.0f} GB a "
                              f"run generates and moves; use fewer or smaller images")
        if self.calibration_tasks is not None and self.calibration_tasks > self.timeable:
            raise OptionError("--calibration-tasks", f"at most {self.timeable} with "
                              f"{self.tasks} task{'s' if self.tasks > 1 else ''} (each node "
                              f"computes one of them untimed first)")

    def _check_own(self) -> None:
        """--script and --inputs come together; --inputs is a folder of entries."""
        if self.script is None and self.inputs is None:
            return
        if self.script is None:
            raise OptionError("--inputs", "is the inputs of your task file: give --script too")
        if self.inputs is None:
            raise OptionError("--script", "needs --inputs, the folder of the tasks' inputs")
        if not self.function.isidentifier():
            raise OptionError("--function", f"expected a Python name, got {self.function!r}")
        if not self.inputs.is_dir():
            raise OptionError("--inputs", f"{self.inputs}: no such folder")
        entries = own_entries(self.inputs)
        if not entries:
            raise OptionError("--inputs", f"{self.inputs} holds no entry (each file or "
                              "folder in it is one task's input)")
        empty = next((entry for entry in entries if not entry_files(entry)), None)
        if empty is not None:
            raise OptionError("--inputs", f"{empty} is a folder without files: an input "
                              "holds data")
        if len(entries) > MAX_OWN_INPUTS:
            raise OptionError("--inputs", f"{len(entries)} entries, at most {MAX_OWN_INPUTS}")

    @property
    def kind(self) -> str:
        """The workload that runs: the user's own (--script), or --workload."""
        return OWN if self.script is not None else self.workload

    @property
    def timeable(self) -> int:
        """Tasks a calibration pass can time: all but the untimed first (one of one)."""
        return max(self.tasks - 1, 1)

    @property
    def calibration_count(self) -> int:
        """The tasks each calibration pass times: --calibration-tasks, or its default."""
        if self.calibration_tasks is not None:
            return self.calibration_tasks
        return min(DEFAULT_CALIBRATION_TASKS, self.timeable)

    @property
    def input_pixel_bytes(self) -> int:
        """RGB bytes of every generated input image (what is generated, stored and moved)."""
        if self.kind == OWN:
            return 0
        if self.workload == "image":
            return self.images * self.image_side**2 * 3
        per_image = self.ps_image_side * (self.ps_image_side * 5 // 4) * 3
        return self.directories * self.images_per_directory * per_image

    @property
    def tasks(self) -> int:
        if self.inputs is not None and self.kind == OWN:
            return len(own_entries(self.inputs))
        return self.images if self.workload == "image" else self.directories

    def parameters(self) -> dict[str, Any]:
        values = asdict(self)
        values["schedulers"] = list(self.schedulers)
        values["profile_file"] = None if self.profile_file is None else str(self.profile_file)
        values["site_netns"] = None if self.site_netns is None else list(self.site_netns)
        values["script"] = None if self.script is None else str(self.script)
        values["inputs"] = None if self.inputs is None else str(self.inputs)
        values["calibration_tasks"] = self.calibration_count  # what the run applies
        return values


def own_entries(folder: Path) -> list[Path]:
    """The entries of an --inputs folder, one task each, in name order (hidden ones left
    out)."""
    return sorted((entry for entry in folder.iterdir() if not entry.name.startswith(".")),
                  key=lambda entry: entry.name)


def entry_files(entry: Path) -> list[Path]:
    """The files of one input: the entry itself, or every file under it, in name order."""
    if entry.is_file():
        return [entry]
    return sorted(path for path in entry.rglob("*") if path.is_file())


def runnable(options: BurstOptions) -> None:
    """What only the workload's full command line can meet: the launcher names the bucket."""
    if options.data == "s3" and not options.bucket:
        raise OptionError("--bucket", "needed with --data s3, got none")


BURST_SPEC = OptionSpec(
    BurstOptions,
    prog="python -m workloads.burst",
    description="HPC->cloud burst workloads (image, param-server, or your own task function "
    "with --script) under Ray's default scheduler and a data-aware streaming scheduler; "
    "writes summary.json, records, outputs, provenance.json.",
    complete=runnable,
)
