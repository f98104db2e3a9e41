"""Can't Be Late's own simulator (`sky_spot`), run as it is from checkouts the user names,
never copied into the project: the simulator from a checkout of Frontier-CS
(research/problems/cant_be_late/common/cant-be-late-simulator) and Uniform Progress
(`rc_cr_threshold.py` with its base `rc_threshold.py`, sky_spot/strategies/) from a
checkout of skynomad-artifact, found as modules of the simulator's package.

Its fastest configuration: its own per-start-point loop (`simulate._simulate_one`, after the
`reset`s `simulate.simulate` makes), without its results file, progress bar or logging; the
modules it imports only for those (`tqdm`, `wandb`) are stood in for when not installed.
And DOLL's side of the same job (`doll_job`): one worker, Can't Be Late's rules, the trace
read as that simulator reads it.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import math
import sys
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workloads.doll.options import SimOptions

WORK_HOURS, DEADLINE_HOURS, OVERHEAD_HOURS = 48.0, 52.0, 0.2
"""Can't Be Late's job: 48 h of work, a 52 h deadline, 0.2 h restart overhead."""
ON_DEMAND_PRICE, SPOT_PRICE = 3.06, 0.9731
"""The simulator's V100 prices ($/h) for traces without prices."""
BATCHES = 20_000
"""DOLL's job in batches: 48 h / 20,000 is 8.6 s of work a batch (a preempted partial batch
is lost in DOLL, not in Can't Be Late: about 4 s a preemption)."""
SIMULATOR_HELP = ("a checkout of github.com/YanagiOrigami/Frontier-CS (its "
                  "research/problems/cant_be_late/common/cant-be-late-simulator is used)")
STRATEGY_HELP = ("a checkout of github.com/andylizf/skynomad-artifact (its "
                 "sky_spot/strategies/rc_cr_threshold.py and rc_threshold.py are used)")


def checkout_parser(module: str, description: str) -> argparse.ArgumentParser:
    """A benchmark's command line against that simulator: the two checkouts, the 1-node
    trace, the start points and --out (results/benchmarks/<module>/<timestamp>)."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{module}",
                                     description=description)
    parser.add_argument("--cant-be-late", type=Path, required=True, metavar="FRONTIER_CS",
                        help=SIMULATOR_HELP)
    parser.add_argument("--uniform-progress", type=Path, required=True,
                        metavar="SKYNOMAD_ARTIFACT", help=STRATEGY_HELP)
    parser.add_argument("--trace", type=Path, required=True,
                        help="a 1-node availability trace of spot-traces (read as 1 = no "
                        "spot, as Can't Be Late's simulator reads it)")
    parser.add_argument("--starts", type=int, default=10, help="start points spread over it")
    stamp = time.strftime("%Y%m%dT%H%M%S")
    parser.add_argument("--out", type=Path, default=Path(f"results/benchmarks/{module}/{stamp}"))
    return parser


@dataclass(frozen=True)
class Simulator:
    """The loaded modules."""

    simulate: Any
    env: Any
    task: Any
    strategy_class: Any


def _stand_in(name: str, **attributes: Any) -> None:
    if importlib.util.find_spec(name) is None:
        module = types.ModuleType(name)
        module.__dict__.update(attributes)
        sys.modules[name] = module


def load_simulator(frontier_cs: Path, skynomad: Path) -> Simulator:
    root = frontier_cs / "research/problems/cant_be_late/common/cant-be-late-simulator"
    strategies = skynomad / "sky_spot/strategies"
    for needed in (root / "sky_spot/simulate.py", strategies / "rc_cr_threshold.py",
                   strategies / "rc_threshold.py"):
        if not needed.is_file():
            raise SystemExit(f"error: {needed} not found (--cant-be-late: {SIMULATOR_HELP}; "
                             f"--uniform-progress: {STRATEGY_HELP})")
    _stand_in("wandb", run=None, log=lambda *a, **k: None, init=lambda *a, **k: None)
    _stand_in("tqdm", tqdm=lambda iterable, *a, **k: iterable)
    sys.path.insert(0, str(root))
    logging.getLogger("sky_spot").setLevel(logging.ERROR)
    from sky_spot import env, simulate, task  # type: ignore[import-not-found]
    from sky_spot import strategies as package

    package.__path__.append(str(strategies))  # the strategies of the other checkout too
    up = importlib.import_module("sky_spot.strategies.rc_cr_threshold")
    return Simulator(simulate, env, task, up.RCCRThresholdStrategy)


@dataclass(frozen=True)
class CblRun:
    cost: float
    finish_hours: float
    ticks: int


def cbl_runs(simulator: Simulator, trace_file: Path, starts: list[int]) -> list[CblRun]:
    """Uniform Progress on the job from each start tick, as `simulate.simulate` runs each
    of its environments (reset, then its per-run loop); cost and finish from its records."""
    args = argparse.Namespace(deadline_hours=DEADLINE_HOURS,
                              restart_overhead_hours=[OVERHEAD_HOURS],
                              inter_task_overhead=[0.0])
    strategy = simulator.strategy_class(args)
    task = simulator.task.SingleTask({"duration": WORK_HOURS})
    runs = []
    for start in starts:
        env = simulator.env.TraceEnv(str(trace_file), start_hours(start, trace_gap(trace_file)))
        env.reset()
        strategy.reset(env, task)
        history, ticks = simulator.simulate._simulate_one(env, strategy)
        runs.append(CblRun(history[-1]["Cost"], finish_of(strategy.task_done_time,
                                                          env.gap_seconds), ticks))
    return runs


def trace_gap(trace_file: Path) -> float:
    import json

    return float(json.loads(trace_file.read_text())["metadata"]["gap_seconds"])


def start_hours(tick: int, gap_s: float) -> float:
    """The simulator's --env-start-hours for a start tick: it starts at ⌈hours·3600/gap⌉."""
    return 0.0 if tick == 0 else (tick - 0.5) * gap_s / 3600.0


def finish_of(done_per_tick: list[float], gap_s: float) -> float:
    """Hours until the work was done, from the work each tick did (entry j is the tick that
    ends at j·gap): the finishing tick counts as far as the work it still needed (its launch
    overhead, if one fell in it, is not known to its records: at most one tick)."""
    total, needed = 0.0, WORK_HOURS * 3600.0
    for index, done in enumerate(done_per_tick):
        if total + done >= needed - 1e-3:
            return ((index - 1) * gap_s + (needed - total)) / 3600.0
        total += done
    return math.nan


def doll_job(trace_file: Path, starts: int, policies: tuple[str, ...] =
             ("uniform-progress",), workers: int = 1) -> SimOptions:
    """DOLL's side: the same job in hours on one worker (K = 1), fixed prices, Can't Be
    Late's rules, the trace read as that simulator reads it (1 = no spot)."""
    return SimOptions(
        policies=policies, workers=workers, k=1, batches=min(BATCHES * workers, 1_000_000),
        work_hours=WORK_HOURS, deadline_hours=DEADLINE_HOURS,
        restart_overhead_hours=OVERHEAD_HOURS, on_demand_price=ON_DEMAND_PRICE,
        spot_price=SPOT_PRICE, rules="cant-be-late", capacity_reading="unavailable",
        capacity_trace=(trace_file,), starts=starts, warning_s=None,
    )
