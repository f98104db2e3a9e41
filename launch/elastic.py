"""`invoke run-elastic`: the elastic workload's command line, made from its option spec, the
script (and its working dir) shipped with the code, handed to the one target path (a fresh
spot lab by default, --address or --stack); on the lab the run's preemption schedule is
carried out (LabInterrupter); its cost priced and its figure drawn here from the records."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from launch.elastic_cost import price_run
from launch.options import ELASTIC_LAB_SPEC, RequirementsOptions, TargetOptions
from launch.requirements import user_requirements
from launch.targets import LAB_RECORD, run_workload
from launch.workload import WorkloadRun
from spotlab.config import SpotLabConfig
from spotlab.lab import SpotLab, read_events
from spotlab.options import SpotLabOptions
from workloads.common.options import OptionError
from workloads.common.results import read_json
from workloads.common.storage import LocalStorage
from workloads.elastic.figures import draw
from workloads.elastic.options import ELASTIC_SPEC, ElasticOptions
from workloads.elastic.progress import preempt_request
from workloads.elastic.script import check_script


class LabInterrupter:
    """The schedule's points, carried out on a spot lab: the driver names the Ray node to
    preempt in its log (workloads/elastic/progress.py); the lab node with that id is
    interrupted at once (spotlab.lab.interrupt, like AWS FIS: a notice, Ray's drain, the
    kill at the deadline). Wraps the line printer the run's log goes through."""

    def __init__(self, show: Callable[[str], None] = print) -> None:
        self._show = show
        self.lab: SpotLab | None = None
        self.applied: list[dict[str, Any]] = []

    def attach(self, lab: SpotLab) -> None:
        self.lab = lab

    def show(self, line: str) -> None:
        self._show(line)
        request = preempt_request(line)
        if request is None or self.lab is None:
            return
        names = {e["ray_node_id"]: e["node"] for e in self.lab.events()
                 if e["event"] == "join" and e.get("ray_node_id")}
        name = names.get(request.node_id)
        if name is None:
            self._show(f"elastic: no node of lab {self.lab.lab_id} is Ray node "
                       f"{request.node_id}: preemption {request.index} not carried out")
            return
        self.lab.interrupt(name)
        self.applied.append({"index": request.index, "point": request.point, "node": name,
                             "ray_node_id": request.node_id, "t": time.time()})


def check_fits_lab(options: ElasticOptions, lab: SpotLabConfig) -> None:
    """The lab's nodes hold a worker and --min-workers of them: one line naming the flag
    if not (Ray would wait for the resources without end)."""
    if options.gpus > 0:
        raise OptionError("--gpus", f"the spot lab's nodes have no GPU, got {options.gpus:g}")
    biggest = max(node.num_cpus for node in lab.nodes())
    if options.cpus > biggest:
        raise OptionError("--cpus", f"a worker needs {options.cpus:g} CPUs; the lab's nodes "
                          f"offer at most {biggest} (--cpus-per-node)")
    held = sum(int(node.num_cpus // options.cpus) for node in lab.nodes())
    if options.min_workers > held:
        raise OptionError("--min-workers", f"{options.min_workers} workers of "
                          f"{options.cpus:g} CPUs; the lab's nodes hold {held} (--spot, "
                          f"--on-demand, --cpus-per-node)")


def elastic_run(options: ElasticOptions, requirements: tuple[str, ...] = ()) -> WorkloadRun:
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
                       inputs=inputs, requirements=requirements)


def run_elastic(
    options: ElasticOptions,
    target: TargetOptions | None = None,
    lab: SpotLabOptions | None = None,
    show: Callable[[str], None] = print,
    requirements: RequirementsOptions | None = None,
) -> Path:
    """Check the script here, run the training on the target (a new spot lab with `lab`'s
    options when no --address/--stack, its schedule carried out), then price it and draw
    its figure; returns the results folder. `requirements`: the script's own imports,
    installed with the job on a cluster (checked installed here for the lab)."""
    target = target or TargetOptions()
    lab = lab or ELASTIC_LAB_SPEC.default()  # the task's lab defaults, also when called
    options.check_files()
    on_lab = not (target.address or target.stack)
    needs = user_requirements(requirements.requirements if requirements else None, on_lab)
    check_script(options.script_path(), options.function, options.torchft)
    if options.preempt_at and not on_lab:
        show(f"elastic: --preempt-at {options.preempt_at} is carried out on the spot lab "
             f"only; on {target.address or target.stack} the cloud preempts (on a stack, "
             "--preemptions at:T,... interrupts through AWS FIS)")
        options = replace(options, preempt_at="")  # the run records what was applied
    lab_config = lab.config()
    if on_lab:
        check_fits_lab(options, lab_config)
    interrupter = LabInterrupter(show)
    folder = run_workload(elastic_run(options, needs), target.address, target.stack, target.out,
                          interrupter.show, lab=lab_config,
                          stall_timeout_s=target.stall_timeout, on_lab=interrupter.attach)
    summary_update: dict[str, Any] = {}
    if on_lab:
        started = read_json(LocalStorage(folder), "summary.json")["started_at"]
        summary_update["preemptions_carried_out"] = [
            {**row, "t": row["t"] - started} for row in interrupter.applied]
    cost = price_results(folder, summary_update)
    if cost is not None:
        show(f"elastic: cost ${cost['cost_usd']:.5f}, all on demand "
             f"${cost['all_on_demand_cost_usd']:.5f}")
    draw(folder)
    return folder


def price_results(folder: Path, also: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Price a results folder's run from the lab record beside it (`spotlab/`): the cost
    goes into summary.json (`cost`, with `also`), its series into records/cost.jsonl. None,
    and only `also` written, without a lab record (--address, --stack: no bill to price
    from)."""
    storage = LocalStorage(folder)
    summary = read_json(storage, "summary.json")
    summary.update(also or {})
    priced = None
    if (folder / LAB_RECORD / "config.json").is_file():
        config = SpotLabConfig.from_dict(read_json(storage, f"{LAB_RECORD}/config.json"))
        events = read_events(folder / LAB_RECORD / "events.jsonl")
        priced = price_run(config, events, summary["started_at"], summary["ended_at"])
        series = priced.pop("series")
        summary["cost"] = priced
        storage.write_bytes("records/cost.jsonl", "".join(
            json.dumps(row, sort_keys=True) + "\n" for row in series).encode())
    storage.write_bytes("summary.json",
                        (json.dumps(summary, indent=2, sort_keys=True) + "\n").encode())
    return priced
