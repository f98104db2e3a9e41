"""One policy's run in the lab: the engine (engine.py: schedule, notices, decisions,
billing, deadline) driven on the wall clock, with Ray actors receiving the data and the
parameter server counting the batches processed, until J are. The policy's progress
(`batches_done`) is the batches of data received, as the simulator counts it: the
parameter server's processed count lags it by the K-batch update being gathered.

It runs in the driver, on the event loop, and talks to the actors only by messages, so a
worker that dies for real never stops it: that slot counts as preempted until a fresh actor
answers. The policy's `decide` runs in a thread of its own with the decision interval as its
time limit: a policy that raises, answers badly or too late fails its own run only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workloads.common.spot_market.capacity import CapacityTrace
from workloads.doll.allocation import cost_bound, predicted_cost_ratio
from workloads.doll.engine import ASKS_PER_MOMENT, Engine, PolicyFailed, raised
from workloads.doll.estimation import estimated_rates
from workloads.doll.fleet import Fleet
from workloads.doll.options import DollOptions

__all__ = ["PolicyFailed", "PolicyResult", "PolicyRun", "Servers"]

TIMELINE_EVERY_S = 0.5


@dataclass(frozen=True)
class Servers:
    fleet: Fleet
    parameter_server: Any
    evaluator: Any
    price_server: Any
    mean_spot_price: float
    capacity: CapacityTrace | None = None


@dataclass
class PolicyResult:
    summary: dict[str, Any]
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


class PolicyRun(Engine):
    def __init__(
        self, entry: str, config: DollOptions, servers: Servers, say: Callable[[str], None]
    ) -> None:
        super().__init__(entry, config, servers.capacity, config.start)
        self.config: DollOptions = config
        self.servers = servers
        self.fleet = servers.fleet
        self.say = say
        self.observed: tuple[float, ...] | None = None
        self.reported_tenths = -1
        self.batches_done = 0
        self.timeline: list[dict[str, Any]] = []

    # --- the loop -------------------------------------------------------------------------

    async def run(self) -> PolicyResult:
        run_id = f"{self.name}-{self.config.seed}"
        ps, config = self.servers.parameter_server, self.config
        await ps.begin.remote(
            run_id, config.batches, config.eval_every, self.servers.evaluator, config.seed
        )
        self.fleet.begin(config.seed, keep_backlog=self.stand_ins_on)
        self.price = await self.servers.price_server.price_at.remote(0.0)
        self.start = time.monotonic()
        try:
            self.update_capacity(0.0)
            await self._decide(0.0, price_changed=False)
            await self._loop(ps)
        except BaseException:
            for slot in self.fleet.slots:
                self.fleet.set_up(slot, False)
            raise
        finish_s = self._now()
        self.bill(finish_s)
        for slot in self.fleet.slots:
            self.fleet.set_up(slot, False)
        self._timeline_row(finish_s)
        return await self._result(run_id, finish_s)

    async def _loop(self, ps: Any) -> None:
        config = self.config
        done = asyncio.wrap_future(ps.wait_done.remote().future())
        ticks = 0
        next_status = self.next_status_s(0.0)  # run() took the one at 0
        capacity_moment = self.next_capacity_moment_s(0.0)
        last_row = -math.inf
        self._apply_states(0.0)
        while True:
            now = self._now()
            price_changed = await self._replay_prices(now)
            self.bill(now)
            due = int(now / config.refresh_s)
            if now >= capacity_moment and ticks >= due:
                self.step(now)  # a capacity tick or notice between two steps
            while ticks < due:
                self.step(now)
                ticks += 1
            if now >= capacity_moment:
                capacity_moment = self.next_capacity_moment_s(now)
            self._watch_lost(now)
            scheduled = now >= next_status
            if self.decision_due(now, scheduled, price_changed):
                self.batches_done = min(await ps.received.remote(), config.batches)
                if scheduled or price_changed:
                    self._report_progress(now)
                    self.observed = await self._observe()
                    next_status = self.next_status_s(now)
                await self._decide(now, price_changed)
            changed = self._apply_states(now)
            if changed or now - last_row >= TIMELINE_EVERY_S:
                self._timeline_row(now)
                last_row = now
            wake = min((ticks + 1) * config.refresh_s, capacity_moment, next_status)
            sleep_s = max(wake - self._now(), 0.0)
            finished, _ = await asyncio.wait({done}, timeout=sleep_s)
            if finished:
                break

    def _now(self) -> float:
        return time.monotonic() - self.start

    async def _replay_prices(self, now: float) -> bool:
        """The price server's changes up to now, taken by the engine (True: it changed)."""
        window = self.price_window(now)
        if window is not None:
            self.price_changes += await self.servers.price_server.changes_between.remote(*window)
        return self.take_prices(now)

    # --- decisions ------------------------------------------------------------------------

    async def _observe(self) -> tuple[float, ...] | None:
        """λ̂ per worker (arrivals / up time), once every worker's share of a batch came."""
        config = self.config
        stats = await self.fleet.stats()
        if sum(s[0] for s in stats if s is not None) < config.workers * config.batch_size:
            return self.observed
        return tuple(estimated_rates(stats, config.rates == "homogeneous", config.rate))

    async def _decide(self, now: float, price_changed: bool) -> None:
        """The policy's decide(state), in a thread of its own, within the decision interval;
        its answer taken by the engine, and asked again while `asks_again`."""
        for _ in range(ASKS_PER_MOMENT):
            state = self.state(now, price_changed, self.batches_done, self.observed)
            self.decided(now, await self._ask(state, now))
            if not self.asks_again():
                return
            price_changed = False

    async def _ask(self, state: Any, now: float) -> Any:
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        decide = self.policy.decide

        def call() -> None:
            try:
                result = decide(state)
            except BaseException as error:  # noqa: BLE001 - the policy's: reported below
                outcome: tuple[str, Any] = ("raised", error)
            else:
                outcome = ("answered", result)
            try:
                answer.set_result(outcome)
            except concurrent.futures.InvalidStateError:
                pass  # the engine stopped waiting: too late

        threading.Thread(target=call, name=f"doll-policy-{self.name}", daemon=True).start()
        limit = self.config.adapt_interval_s
        try:
            kind, value = await asyncio.wait_for(asyncio.wrap_future(answer), timeout=limit)
        except TimeoutError:
            raise PolicyFailed(self.failure(
                now, f"decide took longer than the decision interval (--adapt-interval "
                f"{limit:g} s)")) from None
        if kind == "raised":
            raise PolicyFailed(self.failure(now, raised(value)))
        return value

    def _report_progress(self, now: float) -> None:
        """One line per tenth of the batches received."""
        done_fraction = self.batches_done / self.config.batches
        if int(done_fraction * 10) > self.reported_tenths:
            self.reported_tenths = int(done_fraction * 10)
            capacity = "" if self.capacity_now is None else f" capacity={self.capacity_now}"
            self.say(
                f"[{self.name}] {self.batches_done}/{self.config.batches} batches "
                f"({done_fraction:.0%}) t={now:.1f}s of deadline {self.deadline_s:.1f}s "
                f"cost=${self.meter.cost:.5f} spot={len(self.spot)}/{self.config.workers} "
                f"running={sum(s.up for s in self.fleet.slots)}{capacity}"
            )

    # --- the actors ----------------------------------------------------------------------

    def _watch_lost(self, now: float) -> None:
        """A worker lost for real is replaced at once and counts as preempted until its
        fresh actor answers."""
        for slot in self.fleet.lost():
            self.events.append({"t": now, "worker": slot.index, "event": "lost"})
            self.say(f"[{self.name}] worker {slot.index} lost; replacing it")
            self.fleet.replace(slot, kill=False)
            self.lost.add(slot.index)
        for index in self.fleet.started():
            if index in self.lost:
                self.lost.discard(index)
                self.events.append({"t": now, "worker": index, "event": "back"})

    def _apply_states(self, now: float) -> bool:
        changed = False
        for slot in self.fleet.slots:
            run = self.producing(slot.index, now)
            if run == slot.up:
                continue
            changed = True
            if not run and slot.index in self.spot and slot.index not in self.lost:
                if self.config.preemption == "kill":
                    self.fleet.replace(slot, kill=True)
                    continue
            self.fleet.set_up(slot, run)
        return changed

    def _timeline_row(self, now: float) -> None:
        self.timeline.append(
            {
                "t": round(now, 4),
                "p_spot": self.price,
                "n_spot": len(self.spot),
                "n_running": sum(s.up for s in self.fleet.slots),
                "cost": self.meter.cost,
            }
        )

    # --- the result -----------------------------------------------------------------------

    def _expected_ratio(self, finish_s: float) -> float:
        """The cost ratio the allocation held over the run predicts: a spot worker keeps α
        of its rate (with stand-ins: all of it, a stand-in paid for the other 1 − α)."""
        config, mean_price = self.config, self.servers.mean_spot_price
        spot_count = self.meter.spot_s / finish_s
        if self.stand_ins_on:
            per_spot = config.alpha * mean_price + (1.0 - config.alpha) * config.on_demand_price
            hourly = (config.workers - spot_count) * config.on_demand_price + spot_count * per_spot
            return hourly / (config.workers * config.on_demand_price)
        return predicted_cost_ratio(
            self.rates,
            spot_count,
            self.meter.spot_rate_s / finish_s,
            config.alpha,
            mean_price,
            config.on_demand_price,
        )

    async def _result(self, run_id: str, finish_s: float) -> PolicyResult:
        ps_report = await self.servers.parameter_server.report.remote()
        await self.servers.evaluator.evaluate.remote(
            run_id, ps_report["weights"], ps_report["processed"]
        )
        tests = await self.servers.evaluator.take_rows.remote(run_id)
        updates = ps_report["updates"]
        overheads = [1.0 - u["compute_s"] / u["update_s"] for u in updates if u["update_s"] > 0]
        config, mean_price = self.config, self.servers.mean_spot_price
        # a worker killed (kill mode) or lost for real takes its count with it: no honest total
        counted = config.preemption == "markov" and not any(
            event["event"] == "lost" for event in self.events
        )
        lost = await self.fleet.stream_lost() if counted else None
        summary = {
            "cost": self.meter.cost,
            "cost_bound": None
            if not getattr(self.policy, "spot_ever", True)
            else cost_bound(
                config.deadline_factor, config.alpha, mean_price, config.on_demand_price
            ),
            "deadline_probability": getattr(self.policy, "reported", None),
            "stand_in_s": self.meter.on_demand_s if self.stand_ins_on else None,
            "stream_lost_s": None if lost is None else lost[0],
            # the run's capacity the outages removed: the stream time the whole fleet needs
            # to bring in the points they dropped
            "stream_lost_fleet_s": None if lost is None else lost[1] / sum(self.rates),
            "cost_expected": self._expected_ratio(finish_s),
            "theta0_s": self.theta0_s,
            "deadline_s": self.deadline_s,
            "finish_s": finish_s,
            "deadline_met": finish_s <= self.deadline_s,
            "batches": ps_report["processed"],
            "accuracy": tests[-1]["accuracy"],
            "loss": tests[-1]["loss"],
            "preemptions": self.preemptions,
            "mean_spot_workers": self.meter.spot_s / finish_s,
            "gradients_skipped": ps_report["skipped"],
            "duplicates_rejected": ps_report["duplicates"],
            "ray_overhead_fraction": sum(overheads) / len(overheads) if overheads else None,
        }
        records = {
            f"{self.name}_timeline": self.timeline,
            f"{self.name}_test": tests,
            f"{self.name}_updates": updates,
            f"{self.name}_events": self.events,
        }
        if self.capacity is not None:
            records["capacity"] = self.capacity_rows
        return PolicyResult(summary, records)
