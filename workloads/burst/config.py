"""The burst experiment's parameters, their command-line flags, and their validation."""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from typing import Any

WORKLOADS = ("image", "param-server")
DATA = ("nfs", "s3")
SCHEDULERS = ("default", "data-aware")
SCHEDULER_CHOICES = (*SCHEDULERS, "both")
LABS = ("netns", "process", "aws", "local")


@dataclass(frozen=True)
class BurstConfig:
    workload: str = "image"
    data: str = "nfs"
    schedulers: tuple[str, ...] = SCHEDULERS
    images: int = 48
    image_side: int = 2800
    directories: int = 24
    images_per_directory: int = 6
    ps_image_side: int = 1200
    task_cpus: int | None = None
    data_dir: str = "burst-data"
    stage_dir: str = "burst-stage"
    bucket: str | None = None
    s3_prefix: str = "burst-inputs"
    s3_endpoint: str | None = None
    seed: int = 0
    lab: str = "local"
    bandwidth_mbit: float | None = None
    profile: str = "none"
    profile_file: str | None = None
    out: str | None = None
    results_to_log: bool = False
    target: str = "local"

    def __post_init__(self) -> None:
        problems: list[str] = []
        if self.workload not in WORKLOADS:
            problems.append(f"--workload {self.workload!r} is not one of {', '.join(WORKLOADS)}")
        if self.data not in DATA:
            problems.append(f"--data {self.data!r} is not one of {', '.join(DATA)}")
        if not self.schedulers or any(s not in SCHEDULERS for s in self.schedulers):
            problems.append(
                f"--scheduler {','.join(self.schedulers)!r} is not one of "
                f"{', '.join(SCHEDULER_CHOICES)}"
            )
        if self.lab not in LABS:
            problems.append(f"--lab {self.lab!r} is not one of {', '.join(LABS)}")
        positive = {
            "--images": self.images,
            "--image-side": self.image_side,
            "--directories": self.directories,
            "--images-per-directory": self.images_per_directory,
            "--ps-image-side": self.ps_image_side,
        }
        problems += [
            f"{flag} must be positive, got {value}"
            for flag, value in positive.items()
            if value <= 0
        ]
        if self.image_side < 64 or self.ps_image_side < 64:
            problems.append("--image-side and --ps-image-side must be at least 64 pixels")
        if self.task_cpus is not None and self.task_cpus <= 0:
            problems.append(f"--task-cpus must be positive, got {self.task_cpus}")
        if self.bandwidth_mbit is not None and not self.bandwidth_mbit > 0:
            problems.append(f"--bandwidth-mbit must be positive, got {self.bandwidth_mbit}")
        if self.data == "s3" and not self.bucket:
            problems.append("--data s3 needs --bucket")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def tasks(self) -> int:
        return self.images if self.workload == "image" else self.directories

    def parameters(self) -> dict[str, Any]:
        values = asdict(self)
        values["schedulers"] = list(self.schedulers)
        return values


def scheduler_names(choice: str) -> tuple[str, ...]:
    """`--scheduler` value -> the schedulers to run, in order (default first)."""
    if choice == "both":
        return SCHEDULERS
    return (choice,)


def parser() -> argparse.ArgumentParser:
    d = BurstConfig()
    p = argparse.ArgumentParser(
        prog="python -m workloads.burst",
        description="HPC->cloud burst workloads (image, param-server) under Ray's default "
        "scheduler and a data-aware streaming scheduler; writes summary.json, records, "
        "provenance.json.",
    )
    p.add_argument("--workload", default=d.workload, help="image or param-server")
    p.add_argument("--data", default=d.data, help="nfs (on-prem directory) or s3 (a bucket)")
    p.add_argument("--scheduler", default="both", help="default, data-aware or both")
    p.add_argument("--images", type=int, default=d.images, help="image workload: images")
    p.add_argument(
        "--image-side",
        type=int,
        default=d.image_side,
        help="image workload: side of each square input image (pixels)",
    )
    p.add_argument(
        "--directories",
        type=int,
        default=d.directories,
        help="param-server workload: directories (one task each)",
    )
    p.add_argument(
        "--images-per-directory",
        type=int,
        default=d.images_per_directory,
        help="param-server workload: images per directory",
    )
    p.add_argument(
        "--ps-image-side",
        type=int,
        default=d.ps_image_side,
        help="param-server workload: side of each input image (pixels)",
    )
    p.add_argument(
        "--task-cpus",
        type=int,
        default=None,
        help="CPUs each task reserves (default: the smallest worker node's CPUs)",
    )
    p.add_argument(
        "--data-dir",
        default=d.data_dir,
        help="nfs: the on-prem directory holding the inputs (generated if absent)",
    )
    p.add_argument(
        "--stage-dir",
        default=d.stage_dir,
        help="directory on each node where moved data is staged before compute",
    )
    p.add_argument("--bucket", default=None, help="s3: the bucket holding the inputs")
    p.add_argument("--s3-prefix", default=d.s3_prefix, help="s3: key prefix of the inputs")
    p.add_argument("--s3-endpoint", default=None, help="S3 endpoint URL (a local S3)")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of the generated inputs")
    p.add_argument("--lab", default=d.lab, help=f"where this runs: {', '.join(LABS)}")
    p.add_argument(
        "--bandwidth-mbit",
        type=float,
        default=None,
        help="the cross-site link rate (Mbit/s), for the lower bound",
    )
    p.add_argument("--profile", default=d.profile, help="the bandwidth profile's name")
    p.add_argument("--profile-file", default=None, help="the profile file (provenance)")
    p.add_argument("--out", default=None, help="results folder or s3://bucket/prefix")
    p.add_argument(
        "--results-to-log",
        action="store_true",
        help="also print the results as one line of the log",
    )
    p.add_argument("--target", default=d.target, help="label of the target (provenance)")
    return p


def from_args(argv: list[str] | None = None) -> BurstConfig:
    a = parser().parse_args(argv)
    if a.scheduler not in SCHEDULER_CHOICES:
        raise ValueError(
            f"--scheduler {a.scheduler!r} is not one of {', '.join(SCHEDULER_CHOICES)}"
        )
    return BurstConfig(
        workload=a.workload,
        data=a.data,
        schedulers=scheduler_names(a.scheduler),
        images=a.images,
        image_side=a.image_side,
        directories=a.directories,
        images_per_directory=a.images_per_directory,
        ps_image_side=a.ps_image_side,
        task_cpus=a.task_cpus,
        data_dir=a.data_dir,
        stage_dir=a.stage_dir,
        bucket=a.bucket,
        s3_prefix=a.s3_prefix,
        s3_endpoint=a.s3_endpoint,
        seed=a.seed,
        lab=a.lab,
        bandwidth_mbit=a.bandwidth_mbit,
        profile=a.profile,
        profile_file=a.profile_file,
        out=a.out,
        results_to_log=a.results_to_log,
        target=a.target,
    )
