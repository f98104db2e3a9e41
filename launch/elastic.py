"""`invoke run-elastic`: the elastic workload's command line, made from its option spec, the
script (and its working dir) shipped with the code, handed to the one target path (a fresh
spot lab by default, --address or --stack); its cost priced and its figure drawn here from
the records."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launch.options import ELASTIC_LAB_SPEC, TargetOptions
from launch.targets import LAB_RECORD, run_workload
from launch.workload import WorkloadRun
from spotlab.config import SpotLabConfig
from spotlab.lab import read_events
from spotlab.options import SpotLabOptions
from workloads.common.results import read_json
from workloads.common.storage import LocalStorage
from workloads.elastic.cost import price_run
from workloads.elastic.entry import check_script
from workloads.elastic.figures import draw
from workloads.elastic.options import ELASTIC_SPEC, ElasticOptions


def elastic_run(options: ElasticOptions) -> WorkloadRun:
    """The run: with --working-dir the whole folder travels and --script names the script
    inside it; without, the script file alone travels."""
    args = ELASTIC_SPEC.argv(options, paths=False)
    inputs: dict[str, Path]
    if options.working_dir is not None:
        inputs = {"--working-dir": options.working_dir}
        args += ["--script", options.script.as_posix()]
    else:
        inputs = {"--script": options.script}
    return WorkloadRun(name="elastic", module="workloads.elastic", args=tuple(args),
                       inputs=inputs)


def run_elastic(
    options: ElasticOptions,
    target: TargetOptions | None = None,
    lab: SpotLabOptions | None = None,
    show: Callable[[str], None] = print,
) -> Path:
    """Check the script here, run the training on the target (a new spot lab with `lab`'s
    options when no --address/--stack), then price it and draw its figure; returns the
    results folder."""
    target = target or TargetOptions()
    lab = lab or ELASTIC_LAB_SPEC.default()  # the task's lab defaults, also when called
    options.check_files()
    check_script(options.script_path())
    run = elastic_run(options)
    folder = run_workload(run, target.address, target.stack, target.out, show,
                          lab=lab.config())
    cost = price_results(folder)
    if cost is not None:
        show(f"elastic: cost ${cost['cost_usd']:.5f}, all on demand "
             f"${cost['all_on_demand_cost_usd']:.5f}")
    draw(folder)
    return folder


def price_results(folder: Path) -> dict[str, Any] | None:
    """Price a results folder's run from the lab record beside it (`spotlab/`): the cost
    goes into summary.json (`cost`), its series into records/cost.jsonl. None, and nothing
    written, without a lab record (--address, --stack: no bill to price from)."""
    storage = LocalStorage(folder)
    if not (folder / LAB_RECORD / "config.json").is_file():
        return None
    config = SpotLabConfig.from_dict(read_json(storage, f"{LAB_RECORD}/config.json"))
    events = read_events(folder / LAB_RECORD / "events.jsonl")
    summary = read_json(storage, "summary.json")
    priced = price_run(config, events, summary["started_at"], summary["ended_at"])
    series = priced.pop("series")
    summary["cost"] = priced
    storage.write_bytes("summary.json",
                        (json.dumps(summary, indent=2, sort_keys=True) + "\n").encode())
    storage.write_bytes("records/cost.jsonl",
                        "".join(json.dumps(row, sort_keys=True) + "\n" for row in series).encode())
    return priced
