"""Allocation policies: objects on one interface, the built-in ones and the user's own.

At each decision the engine (policy_run.py) builds a `PolicyState` and calls the policy's
`decide(state)`; it runs on spot exactly the worker indices returned, the rest on demand.
A user's policy is a class in their own file, named on the command line as
`FILE.py:Class` beside the built-in names (see docs/doll.md, "Your own policy").
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from workloads.common.user_code import UserCodeError, import_file
from workloads.doll.allocation import allocate
from workloads.doll.chance import ChanceModel, OutageChain, chance_spot_set, deadline_probability
from workloads.doll.options import DollJob, user_policy_parts


class PolicyFileError(UserCodeError):
    """A policy file that cannot be used: one line naming the file and what is wrong."""


@dataclass(frozen=True)
class PolicyState:
    """What a policy sees at a decision. Times are seconds on the run's (compressed) clock,
    from the start of this policy's run; rates are points/s."""

    workers: int
    rates: tuple[float, ...]
    """λᵢ per worker, as configured."""
    time_s: float
    deadline_s: float
    batches_done: int
    batches_total: int
    batch_size: int
    spot_price: float
    """The current spot price of the trace, $/h."""
    on_demand_price: float
    spot_capacity: int | None
    """Spot instances that can exist now (from --capacity-trace), None without one."""
    spot_up: tuple[bool, ...]
    """Per worker: its spot instance is up now. For a worker on demand: whether one would be
    up under the preemption model (always True with a capacity trace: there the limit is
    spot_capacity)."""
    spot: frozenset[int]
    """The workers on spot now (the last decision)."""
    price_changed: bool
    """The spot price changed since the last decision."""
    observed_rates: tuple[float, ...] | None
    """λ̂ per worker from arrivals / up time so far (None until a batch per worker came)."""
    spot_s: float
    """Spot worker-seconds so far (up or not); spot_up_s: of those, up."""
    spot_up_s: float
    notice_s: tuple[float | None, ...] = ()
    """Per worker: seconds until its spot instance is reclaimed, once its interruption
    notice came (--warning ahead of the loss); None otherwise."""


class Policy(Protocol):
    def decide(self, state: PolicyState) -> Iterable[int]: ...


@dataclass
class Builtin:
    """What the built-in policies share: the run's options, and the deadline probability of
    the plan they report (under the configured chain)."""

    config: DollJob
    reported: float | None = None
    stand_ins = False
    """The engine gives a preempted spot worker an on-demand stand-in (fallback)."""
    spot_ever = True
    """False: never uses spot (no cost bound to report)."""
    report_plan = 0
    """Which plan's probability is reported: the first (0) or the second (1)."""
    reporting = True
    """False: no probability is computed (the simulator reports none; its cost grows with
    the run's length)."""

    def __post_init__(self) -> None:
        self.plans = 0

    def model(self, alpha: float) -> ChanceModel:
        config = self.config
        launch = round(config.launch_delay_compressed_s / config.refresh_s) \
            if self.stand_ins else None
        return ChanceModel(OutageChain.paper(alpha, config.refresh_s), config.batch_size,
                           config.k, target=config.deadline_probability, launch_steps=launch)

    def cheaper(self, state: PolicyState) -> bool:
        return state.spot_price < state.on_demand_price

    def planned(self, state: PolicyState, rates: Collection[float], spot: Collection[int],
                work: float, time_s: float) -> set[int]:
        """Record this plan's probability of meeting the deadline under the preemption
        model (the configured α, whatever α̂ the plan acted on)."""
        if self.plans == self.report_plan and self.reporting:
            down = [not up for up in state.spot_up]
            self.reported = deadline_probability(
                list(rates), sorted(spot), work, time_s, self.model(self.config.alpha), down,
                from_start=state.batches_done == 0,
            )
        self.plans += 1
        return set(spot)


class OnDemand(Builtin):
    spot_ever = False

    def decide(self, state: PolicyState) -> Iterable[int]:
        if self.plans == 0:
            self.planned(state, state.rates, (), work(state), time_left(state))
        return ()


@dataclass
class Static(Builtin):
    """The whole run's allocation, again at each price change: the chance constraint, or
    the paper's expected-throughput formula (`paper`)."""

    paper: bool = False

    def decide(self, state: PolicyState) -> Iterable[int]:
        if self.plans and not state.price_changed:
            return state.spot
        config, rates = self.config, list(state.rates)
        total_work, deadline_s = config.work_points, state.deadline_s
        if self.paper:
            spot = allocate(rates, total_work, deadline_s, config.alpha, state.spot_price,
                            state.on_demand_price)
        else:
            spot = chance_spot_set(rates, total_work, deadline_s, self.model(config.alpha),
                                   state.spot_price, state.on_demand_price, config.alpha)
        return self.planned(state, rates, spot, total_work, deadline_s)


@dataclass
class Adaptive(Builtin):
    """All spot at first; then every --adapt-interval and at each price change, λ and α
    re-estimated and the remaining work re-sized: by the paper's expected throughput
    (`paper`, α̂ = up / spot time) or the chance constraint from each worker's state."""

    paper: bool = False
    report_plan = 1  # its start, all spot, is no plan
    next_s: float = 0.0

    def decide(self, state: PolicyState) -> Iterable[int]:
        config = self.config
        if self.plans == 0:
            start = range(state.workers) if self.cheaper(state) else range(0)
            self.next_s = config.adapt_interval_s
            return self.planned(state, state.rates, start, work(state), time_left(state))
        if state.time_s < self.next_s and not state.price_changed:
            return state.spot
        self.next_s = state.time_s + config.adapt_interval_s
        if state.observed_rates is None:
            return state.spot  # too little seen to estimate λ from
        rates = list(state.observed_rates)
        remaining, time_s = work(state), time_left(state)
        if self.paper:
            alpha = state.spot_up_s / state.spot_s if state.spot_s > 0 else 1.0
            spot = allocate(rates, remaining, time_s, alpha, state.spot_price,
                            state.on_demand_price)
        else:
            alpha = self.alpha_with_prior(state)
            spot = chance_spot_set(
                rates, remaining, time_s, self.model(alpha), state.spot_price,
                state.on_demand_price, alpha, [not up for up in state.spot_up],
                from_start=state.batches_done == 0,
            )
        return self.planned(state, rates, spot, remaining, time_s)

    def alpha_with_prior(self, state: PolicyState) -> float:
        """α̂ = up time / spot time, with the configured α as a prior worth one worker over
        the whole deadline: early on, a few seconds without a preemption say little."""
        prior_s = state.deadline_s
        up_s = state.spot_up_s + self.config.alpha * prior_s
        return min(up_s / (state.spot_s + prior_s), 1.0)


class Fallback(Builtin):
    """Every worker on spot while spot is cheaper (none otherwise); the engine gives a
    preempted one an on-demand stand-in."""

    stand_ins = True

    def decide(self, state: PolicyState) -> Iterable[int]:
        if self.plans and not state.price_changed:
            return state.spot
        spot = range(state.workers) if self.cheaper(state) else ()
        if self.plans:
            return spot
        return self.planned(state, state.rates, spot, work(state), time_left(state))


@dataclass
class UniformProgress(Builtin):
    """Can't Be Late's Uniform Progress (NSDI'24), adapted to N workers: the uniform line is
    batches_total·t/deadline. Every worker whose spot instance is up runs on spot, and stays
    there until preempted (exploitation); while the run is behind the line, the idle spot
    workers (preempted, or noticed: about to be) move to on demand and stay there until
    progress reaches the line 2d ahead and a spot instance can be had for them
    (hysteresis); once the remaining work at the all-on-demand rate plus 2d no longer fits
    before the deadline, the idle and on-demand workers stay on demand for good (safety
    net). d, the restart overhead, is --launch-delay."""

    on_demand: set[int] | None = None
    """Moved to on demand to catch up, until the run is 2d ahead of the line."""
    for_good: set[int] = field(default_factory=set)
    """Moved to on demand by the safety net, to the end."""

    def decide(self, state: PolicyState) -> Iterable[int]:
        if self.on_demand is None:
            self.on_demand = set()
            self.everyone = frozenset(range(state.workers))
            self.rate = sum(state.rates)
            self.d = self.config.launch_delay_compressed_s
            spot = self.everyone if self.cheaper(state) else set()
            return self.planned(state, state.rates, spot, work(state), time_left(state))
        if not self.cheaper(state):
            return ()
        d = self.d
        safety_net = time_left(state) < work(state) / self.rate + 2 * d
        behind = state.batches_done < uniform_line(state, state.time_s)
        # the idle workers matter only to the safety net and behind the line
        idle = idle_spot_workers(state) if safety_net or behind else set()
        if safety_net:
            self.for_good |= idle | self.on_demand
        self.on_demand -= self.for_good
        if self.on_demand and state.batches_done >= uniform_line(state, state.time_s + 2 * d):
            # caught up: back to spot, those a spot instance can be had for
            back = sorted(i for i in self.on_demand if state.spot_up[i])
            if state.spot_capacity is not None:
                free = state.spot_capacity - sum(1 for i in state.spot if state.spot_up[i])
                back = back[:max(free, 0)]
            self.on_demand -= set(back)
        if behind:
            self.on_demand |= idle
        if not self.on_demand and not self.for_good:
            return self.everyone
        return self.everyone - self.on_demand - self.for_good


def uniform_line(state: PolicyState, time_s: float) -> float:
    return state.batches_total * time_s / state.deadline_s


def idle_spot_workers(state: PolicyState) -> set[int]:
    """Spot workers without a spot instance up (preempted, or beyond the capacity), or
    about to lose theirs (noticed)."""
    up, noticed = state.spot_up, state.notice_s
    if noticed and noticed.count(None) < len(noticed):
        return {i for i in state.spot if not up[i] or noticed[i] is not None}
    return {i for i in state.spot if not up[i]}


def work(state: PolicyState) -> float:
    """Points still to process."""
    return float(max(state.batches_total - state.batches_done, 0) * state.batch_size)


def time_left(state: PolicyState) -> float:
    return state.deadline_s - state.time_s


BUILTINS: dict[str, Any] = {
    "on-demand": lambda config: OnDemand(config),
    "static": lambda config: Static(config),
    "static-paper": lambda config: Static(config, paper=True),
    "adaptive": lambda config: Adaptive(config),
    "adaptive-paper": lambda config: Adaptive(config, paper=True),
    "fallback": lambda config: Fallback(config),
    "uniform-progress": lambda config: UniformProgress(config),
}


def make_policy(name: str, config: DollJob) -> Any:
    """The policy object of one `--policy` entry: a built-in, or `FILE.py:Class` (loaded
    from --policy-file when the launcher shipped the file there)."""
    if name in BUILTINS:
        return BUILTINS[name](config)
    path, class_name = user_policy_parts(name)
    return load_policy_class(getattr(config, "policy_file", None) or path, class_name)()


def policy_name(entry: str) -> str:
    """The name a policy's results go by: a built-in's name, or a user policy's class."""
    return entry if entry in BUILTINS else user_policy_parts(entry)[1]


def check_policy_file(path: Path, class_name: str) -> None:
    """The file parses and defines the class at its top level (read, not run): checked where
    the run is launched, before anything starts."""
    where = f"--policy: {path}"
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except FileNotFoundError:
        raise PolicyFileError(f"{where}: no such file") from None
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError) as error:
        raise PolicyFileError(f"{where}: {' '.join(str(error).split())}") from None
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    if class_name not in classes:
        raise PolicyFileError(f"{where} defines no class {class_name} at its top level "
                              f"(classes: {', '.join(sorted(classes)) or 'none'})")
    methods = {node.name for node in classes[class_name].body
               if isinstance(node, ast.FunctionDef)}
    if "decide" not in methods and not classes[class_name].bases:
        raise PolicyFileError(f"{where}: class {class_name} has no decide(self, state) method")


def load_policy_class(path: Path, class_name: str) -> type:
    """Import the user's file (workloads.common.user_code: its folder on sys.path for its own
    imports, once per process) and return the class, checked to have a callable `decide`."""
    check_policy_file(path, class_name)
    try:
        module = import_file(path, "--policy")
    except UserCodeError as error:
        raise PolicyFileError(str(error)) from None
    found = getattr(module, class_name, None)
    if not isinstance(found, type) or not callable(getattr(found, "decide", None)):
        raise PolicyFileError(f"--policy: {path}: {class_name} is not a class with a "
                              f"decide(self, state) method")
    return found


def checked_spot_set(chosen: Any, workers: int) -> set[int]:
    """The decision as a set of worker indices, or ValueError saying what is wrong."""
    kind = type(chosen)
    if kind is range:  # its items are ints (never bools): only its ends need checking
        if not chosen:
            return set()
        low, high = sorted((chosen[0], chosen[-1]))
        if 0 <= low and high < workers:
            return set(chosen)
    elif kind in (set, frozenset, list, tuple) and {int}.issuperset(map(type, chosen)) \
            and (not chosen or 0 <= min(chosen) and max(chosen) < workers):
        return set(chosen)  # the common answers, plain ints (no bools), checked at once
    if isinstance(chosen, str | bytes) or not isinstance(chosen, Iterable):
        raise ValueError(f"decide returned {type(chosen).__name__}, not a collection of "
                         f"worker indices")
    spot: set[int] = set()
    for index in chosen:
        if isinstance(index, bool) or not isinstance(index, int) and not (
            hasattr(index, "__index__") and not isinstance(index, float)
        ):
            raise ValueError(f"decide returned {index!r}, not a worker index")
        value = int(index)
        if not 0 <= value < workers:
            raise ValueError(f"decide returned worker {value}, outside range({workers})")
        spot.add(value)
    return spot
