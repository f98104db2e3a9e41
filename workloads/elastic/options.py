"""The elastic-training workload's options: the one spec its argparse, `invoke run-elastic`
and the launcher's command line are made from (see workloads/common/options.py).

Everything after `--` on the command line is the user script's own argv (`script_args`)."""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workloads.common.options import OptionError, OptionSpec, check_fields, option
from workloads.common.results import ResultsOptions

EXAMPLE_SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "elastic" / "digits_cnn.py"
SHORT_FLAGS = {"-f": "--script", "-d": "--working-dir", "-m": "--max-workers"}
"""The seed's one-letter flags, for `python -m workloads.elastic` and `invoke run-elastic`."""


@dataclass(frozen=True, kw_only=True)
class ElasticOptions(ResultsOptions):
    script: Path = option(
        EXAMPLE_SCRIPT,
        "training script defining train_loop_per_worker(config) (relative to --working-dir "
        "if given); not set: the shipped digits CNN",
    )
    working_dir: Path | None = option(
        None, "folder shipped with the script: its modules are importable by the script"
    )
    max_workers: int = option(4, "most data-parallel workers", minimum=1, maximum=256)
    min_workers: int = option(1, "fewest workers the run goes on with", minimum=1)
    cpus: float = option(1.0, "CPUs per worker", above=0.0)
    gpus: float = option(0.0, "GPUs per worker (NCCL when > 0)", minimum=0.0)
    checkpoint_timeout: float = option(
        120.0,
        "seconds the workers hold at a notice checkpoint for the restart; past it they "
        "train on (a later restart resumes from the newest checkpoint that landed, else "
        "from step 0)",
        above=0.0,
    )
    cluster_rescale_timeout: float = option(
        60.0,
        "seconds between Ray Train's checks of a running group's worker count (its "
        "elastic_resize_monitor_interval_s): grow into returned capacity, or shrink to "
        "the count the worker-count rule picks",
        above=0.0,
    )
    checkpoint_every: int = option(
        0, "also checkpoint every N steps (0: only on a notice and at the end)", minimum=0
    )
    on_notice: str = option(
        "checkpoint",
        "what a spot notice does: checkpoint (at the current step, then hold) or ignore "
        "(periodic checkpoints only and no checkpoint before a resize, as restart-based tools "
        "do)",
        choices=("checkpoint", "ignore"),
    )
    notice_poll: float = option(
        1.0, "seconds between a worker's polls of its node's spot notice", above=0.0
    )
    max_failures: int = option(
        3, "non-preemption failures tolerated (preemptions have no limit)", minimum=0
    )
    seed: int = option(0, "seed handed to the script (config['seed'])", minimum=0)
    script_args: str = option("", "the script's own arguments (what follows `--`)")

    def __post_init__(self) -> None:
        check_fields(self)
        if self.min_workers > self.max_workers:
            raise OptionError(
                "--min-workers",
                f"expected at most --max-workers ({self.max_workers}), got {self.min_workers}",
            )
        try:
            shlex.split(self.script_args)
        except ValueError as error:
            raise OptionError("--script-args", f"cannot be split: {error}") from None

    @property
    def argv(self) -> list[str]:
        """The script's own arguments."""
        return shlex.split(self.script_args)

    def script_path(self) -> Path:
        return self.working_dir / self.script if self.working_dir else self.script

    def check_files(self) -> None:
        """The script (and working dir) exist: one line naming the flag if not."""
        if self.working_dir is not None and not self.working_dir.is_dir():
            raise OptionError("--working-dir", f"{self.working_dir}: no such folder")
        if not self.script_path().is_file():
            raise OptionError("--script", f"{self.script_path()}: no such file")

    def parameters(self) -> dict[str, Any]:
        document = asdict(self)
        document["script"] = str(self.script)
        document["working_dir"] = None if self.working_dir is None else str(self.working_dir)
        document["script_argv"] = self.argv
        return document


def split_command_line(argv: list[str]) -> list[str]:
    """A command line with the seed's short flags spelled out and whatever follows `--`
    folded into `--script-args` (one shell-quoted text)."""
    rest: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, rest = argv[:cut], argv[cut + 1 :]
    argv = [SHORT_FLAGS.get(word, word) for word in argv]
    return [*argv, "--script-args", shlex.join(rest)] if rest else argv


ELASTIC_SPEC = OptionSpec(
    ElasticOptions,
    prog="python -m workloads.elastic",
    description="Elastic data-parallel training on Ray Train V2 that checkpoints at a spot "
    "notice, rescales to the nodes left and resumes without losing a step; writes "
    "summary.json, provenance.json and records/. -f, -d and -m are short for --script, "
    "--working-dir and --max-workers; what follows `--` is the script's own argv.",
)
