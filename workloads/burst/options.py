"""The burst workload's options: the one spec its argparse, `invoke run-burst` /
`sweep-burst` and the launcher's command lines are made from (see
workloads/common/options.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vocab.names import NAME, shown
from workloads.burst.cpu import parse_site_namespaces
from workloads.common.options import OptionError, OptionSpec, check_fields, option

WORKLOADS = ("image", "param-server")
DATA = ("nfs", "s3")
SCHEDULERS = ("default", "data-aware")
LABS = ("netns", "aws", "local")
SHAPED_LABS = ("netns", "aws")
"""Where the launcher shaped the site link to --bandwidth-mbit (tc); elsewhere nothing was."""
SIZES = "sized for a few minutes at 30 Mbit/s"
MAX_SIDE = 8192
GB = 1 << 30
MAX_INPUT_PIXEL_BYTES = 16 * GB
"""Inputs are generated on the HPC site's disk and cross the shaped link: 16 GB is hours."""
DEFAULT_CALIBRATION_TASKS = 3


@dataclass(frozen=True, kw_only=True)
class BurstOptions:
    workload: str = option(
        "image",
        "image (per-image transform) or param-server (per-directory gradients)",
        choices=WORKLOADS,
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
    s3_prefix: str = option("burst-inputs", "s3: key prefix of the inputs (names joined by "
                            "'/', each a name as --lab's)")
    inputs_cache: str | None = option(
        None,
        "a local directory of generated inputs kept across runs: inputs with the same "
        "parameters are copied from it instead of generated again (generated there first)",
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
    profile: str = option("none", "the bandwidth profile's name", launcher=True)
    profile_file: Path | None = option(None, "the profile file (provenance)", launcher=True)
    out: str | None = option(None, "results folder or s3://bucket/prefix", launcher=True)
    results_to_log: bool = option(
        False, "also print the results as one line of the log", launcher=True
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
        if self.workload == "image":
            return self.images * self.image_side**2 * 3
        per_image = self.ps_image_side * (self.ps_image_side * 5 // 4) * 3
        return self.directories * self.images_per_directory * per_image

    @property
    def tasks(self) -> int:
        return self.images if self.workload == "image" else self.directories

    def parameters(self) -> dict[str, Any]:
        values = asdict(self)
        values["schedulers"] = list(self.schedulers)
        values["profile_file"] = None if self.profile_file is None else str(self.profile_file)
        values["site_netns"] = None if self.site_netns is None else list(self.site_netns)
        values["calibration_tasks"] = self.calibration_count  # what the run applies
        return values


def runnable(options: BurstOptions) -> None:
    """What only the workload's full command line can meet: the launcher names the bucket."""
    if options.data == "s3" and not options.bucket:
        raise OptionError("--bucket", "needed with --data s3, got none")


BURST_SPEC = OptionSpec(
    BurstOptions,
    prog="python -m workloads.burst",
    description="HPC->cloud burst workloads (image, param-server) under Ray's default "
    "scheduler and a data-aware streaming scheduler; writes summary.json, records, "
    "provenance.json.",
    complete=runnable,
)
