"""The elastic-training workload's options: the one spec its argparse, `invoke run-elastic`
and the launcher's command line are made from (see workloads/common/options.py).

Everything after `--` on the command line is the user script's own argv (`script_args`).
The defaults are a demo sized for a 2-core laptop; `--preset paper` gives the original's
scale (AdaptDL on Ray AWS).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workloads.common.input_files import InputFileError, parse_json
from workloads.common.options import OptionError, OptionSpec, check_fields, option
from workloads.common.results import ResultsOptions
from workloads.elastic.schedule import Point, ScheduleError, parse_schedule

EXAMPLE_SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "elastic" / "digits_cnn.py"
ENTRY_POINT = "train_loop_per_worker"
"""The training function's name in Ray Train's docs and examples."""
SHORT_FLAGS = {"-f": "--script", "-d": "--working-dir", "-m": "--max-workers"}
"""The original's one-letter flags, for `python -m workloads.elastic` and `invoke run-elastic`."""
DEMO_SCHEDULE = "6s,6s,6s"
"""Three preemptions, each after the running worker group trained 6 s."""


@dataclass(frozen=True, kw_only=True)
class ElasticOptions(ResultsOptions):
    script: Path = option(
        EXAMPLE_SCRIPT,
        "training script (relative to --working-dir if given); not set: the shipped digits CNN",
    )
    function: str = option(
        ENTRY_POINT, "the script's training function, Ray Train's train_loop_per_worker"
    )
    config: str | None = option(
        None,
        "the training function's config (Ray Train's train_loop_config) as a JSON object; "
        "`--key value` words after `--` are set on top of it",
    )
    working_dir: Path | None = option(
        None, "folder shipped with the script: its modules are importable by the script"
    )
    max_workers: int = option(4, "most data-parallel workers", minimum=1, maximum=256)
    min_workers: int = option(1, "fewest workers the run goes on with", minimum=1)
    cpus: float = option(1.0, "CPUs per worker", above=0.0)
    gpus: float = option(0.0, "GPUs per worker (NCCL when > 0)", minimum=0.0)
    checkpoint_timeout: float = option(
        30.0,
        "seconds the workers hold at a notice checkpoint for the restart; past it they "
        "train on (a later restart resumes from the newest checkpoint Ray Train committed)",
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
        0,
        "also checkpoint every N steps (ElasticLoop and checkpoint_due scripts; 0: only on a "
        "notice, a resize and at the end)",
        minimum=0,
    )
    on_notice: str = option(
        "checkpoint",
        "what a spot notice does: checkpoint (at the current step, then hold) or ignore "
        "(periodic checkpoints only and no checkpoint before a resize, as restart-based tools "
        "do)",
        choices=("checkpoint", "ignore"),
    )
    checkpoint_to: str = option(
        "bucket",
        "where Ray Train keeps the checkpoints: bucket (beside the results: the stack's "
        "bucket; on a lab a local folder removed after the run) or shared (a new folder under "
        "checkpoints/ in the shared folder every node sees, SPOTBURST_SHARED; kept after the "
        "run)",
        choices=("bucket", "shared"),
    )
    notice_poll: float = option(
        0.5, "seconds between a worker's polls of its node's spot notice", above=0.0
    )
    max_failures: int = option(
        3, "non-preemption failures tolerated (preemptions have no limit)", minimum=0
    )
    metric: str | None = option(
        None, "the reported metric the figure draws (not set: the first the script reports)"
    )
    preempt_at: str = option(
        DEMO_SCHEDULE,
        "the run's preemption schedule on the spot lab: comma-separated points, each N (once "
        "N steps are done; increasing), Ns (once the running worker group trained N s) or "
        "start (as the next worker group starts); at each a spot node hosting a worker is "
        "interrupted (notice, drain, kill). Empty: none (on the lab, --alpha below 1 adds the "
        "lab's own Markov-chain preemptions)",
    )
    torchft: bool = option(
        False,
        "survivor mode: the script is written for torchft (its Manager, DDP, Optimizer, "
        "ProcessGroupGloo, PGTransport); one replica group per worker, a notice removes only "
        "its group and a new group joins from a live peer's state (docs/elastic.md)",
    )
    preset: str | None = option(
        None,
        "paper: the scale of the original, AdaptDL on Ray AWS (checkpoint timeout 120 s, "
        "notices polled every 5 s, no scheduled preemption: the cloud's, or the lab's chain "
        "with --alpha 0.9); not set: the laptop demo",
        choices=("paper",),
    )
    script_args: str = option("", "the script's own arguments (what follows `--`)")

    def __post_init__(self) -> None:
        check_fields(self)
        if self.min_workers > self.max_workers:
            raise OptionError(
                "--min-workers",
                f"expected at most --max-workers ({self.max_workers}), got {self.min_workers}",
            )
        if not self.function.isidentifier():
            raise OptionError("--function", f"expected a Python name, got {self.function!r}")
        try:
            shlex.split(self.script_args)
        except ValueError as error:
            raise OptionError("--script-args", f"cannot be split: {error}") from None
        if self.config is not None:
            try:
                given = parse_json("--config", self.config)
            except InputFileError as error:
                problem = str(error).removeprefix("--config").lstrip(": ").removeprefix("is ")
                raise OptionError("--config", problem) from None
            if not isinstance(given, dict):
                raise OptionError("--config", f"expected a JSON object, got {self.config!r}")
        try:
            parse_schedule(self.preempt_at)
        except ScheduleError as error:
            raise OptionError("--preempt-at", str(error)) from None
        if self.metric is not None and not self.metric.strip():
            raise OptionError("--metric", "expected a metric name")

    @property
    def argv(self) -> list[str]:
        """The script's own arguments (its sys.argv[1:] on every worker)."""
        return shlex.split(self.script_args)

    @property
    def train_loop_config(self) -> dict[str, Any]:
        """Ray Train's train_loop_config: --config, with `--key value` words after `--`."""
        return {**(json.loads(self.config) if self.config else {}), **config_from_args(self.argv)}

    @property
    def schedule(self) -> tuple[Point, ...]:
        return parse_schedule(self.preempt_at)

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
        document["train_loop_config"] = self.train_loop_config
        return document


def config_from_args(argv: list[str]) -> dict[str, Any]:
    """The `--key value` words of a command line as a config: `--batch-size 32 --amp` gives
    {"batch_size": 32, "amp": True}; a value is read as JSON when it parses (numbers, true,
    lists), else kept as text; words that are not `--key` are left to the script's argv."""
    config: dict[str, Any] = {}
    index = 0
    while index < len(argv):
        word = argv[index]
        index += 1
        if not word.startswith("--") or len(word) == 2:
            continue
        key, _, inline = word[2:].partition("=")
        key = key.replace("-", "_")
        if inline:
            config[key] = _value(inline)
        elif index < len(argv) and not argv[index].startswith("--"):
            config[key] = _value(argv[index])
            index += 1
        else:
            config[key] = True
    return config


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def split_command_line(argv: list[str]) -> list[str]:
    """A command line with the original's short flags spelled out and whatever follows `--`
    folded into `--script-args` (one shell-quoted text)."""
    rest: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, rest = argv[:cut], argv[cut + 1 :]
    argv = [SHORT_FLAGS.get(word, word) for word in argv]
    return [*argv, "--script-args", shlex.join(rest)] if rest else argv


PAPER = {"checkpoint_timeout": 120.0, "notice_poll": 5.0, "preempt_at": ""}
"""The original's scale: its checkpoint timeout (and its rescale timeout, the default), its 5 s
metadata poll, and no scheduled preemption."""

ELASTIC_SPEC = OptionSpec(
    ElasticOptions,
    prog="python -m workloads.elastic",
    description="Elastic data-parallel training on Ray Train V2 that checkpoints at a spot "
    "notice, rescales to the nodes left and resumes without losing a step; writes "
    "summary.json, provenance.json and records/. -f, -d and -m are short for --script, "
    "--working-dir and --max-workers; what follows `--` is the script's own argv.",
    presets={"paper": PAPER},
)
