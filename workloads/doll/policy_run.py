"""One policy's run: the controller that drives the fleet through the preemption schedule,
re-allocates spot and on-demand workers, bills them, and waits for J processed batches.

It runs in the driver, on the event loop, and talks to the actors only by messages, so a
worker that dies for real never stops it: that slot counts as preempted until a fresh actor
answers.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workloads.common.billing import Meter
from workloads.doll.allocation import allocate, cost_bound, predicted_cost_ratio
from workloads.doll.estimation import estimated_rates
from workloads.doll.fleet import Fleet, Slot
from workloads.doll.options import DollOptions
from workloads.doll.preemption import MarkovAvailability

TIMELINE_EVERY_S = 0.5


@dataclass(frozen=True)
class Servers:
    fleet: Fleet
    parameter_server: Any
    evaluator: Any
    price_server: Any
    mean_spot_price: float


@dataclass
class PolicyResult:
    summary: dict[str, Any]
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


class PolicyRun:
    def __init__(
        self, policy: str, config: DollOptions, servers: Servers, say: Callable[[str], None]
    ) -> None:
        self.policy = policy
        self.config = config
        self.servers = servers
        self.fleet = servers.fleet
        self.say = say
        self.rates = config.worker_rates()
        self.theta0_s = config.work_points / sum(self.rates)
        self.deadline_s = config.deadline_factor * self.theta0_s
        self.chains = MarkovAvailability(config.workers, config.alpha, config.seed)
        self.chain_up = [True] * config.workers
        self.lost: set[int] = set()  # slots lost for real, their fresh actor still starting
        self.spot: set[int] = set()
        self.meter = Meter(config.on_demand_price)
        self.price = 0.0
        self.price_changes: list[tuple[float, float]] = []
        self.prices_known_until = 0.0
        self.reported_tenths = -1
        self.preemptions = 0
        self.processed = 0
        self.timeline: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []

    # --- the loop -------------------------------------------------------------------------

    async def run(self) -> PolicyResult:
        run_id = f"{self.policy}-{self.config.seed}"
        ps, config = self.servers.parameter_server, self.config
        await ps.begin.remote(
            run_id, config.batches, config.eval_every, self.servers.evaluator, config.seed
        )
        self.fleet.begin(config.seed)
        self.price = await self.servers.price_server.price_at.remote(0.0)
        self.spot = self._initial_spot()
        done = asyncio.wrap_future(ps.wait_done.remote().future())
        self.start = time.monotonic()
        ticks = 0
        next_status = 0.0
        last_row = -math.inf
        self._apply_states(0.0)
        while True:
            now = self._now()
            price_changed = await self._replay_prices(now)
            self._bill(now)
            due = int(now / config.refresh_s)
            while ticks < due:
                self._step_chains(now)
                ticks += 1
            self._watch_lost(now)
            if now >= next_status or price_changed:
                self.processed = await ps.progress.remote()
                self._report_progress(now)
                await self._reallocate(now, price_changed)
                next_status = now + config.adapt_interval_s
            changed = self._apply_states(now)
            if changed or now - last_row >= TIMELINE_EVERY_S:
                self._timeline_row(now)
                last_row = now
            sleep_s = max((ticks + 1) * config.refresh_s - self._now(), 0.0)
            finished, _ = await asyncio.wait({done}, timeout=sleep_s)
            if finished:
                break
        finish_s = self._now()
        self._bill(finish_s)
        for slot in self.fleet.slots:
            self.fleet.set_up(slot, False)
        self._timeline_row(finish_s)
        return await self._result(run_id, finish_s)

    def _now(self) -> float:
        return time.monotonic() - self.start

    async def _replay_prices(self, now: float) -> bool:
        """Bill up to each price change replayed by now and take the new price; True when
        the price differs from before."""
        if now >= self.prices_known_until:
            window_end = self.prices_known_until + self.deadline_s
            self.price_changes += await self.servers.price_server.changes_between.remote(
                self.prices_known_until, window_end
            )
            self.prices_known_until = window_end
        changed = False
        while self.price_changes and self.price_changes[0][0] <= now:
            at, price = self.price_changes.pop(0)
            self._bill(at)
            changed = changed or price != self.price
            self.price = price
        return changed

    # --- allocation -----------------------------------------------------------------------

    def _initial_spot(self) -> set[int]:
        everyone = set(range(self.config.workers))
        if self.policy == "on-demand":
            return set()
        if self.policy == "adaptive":
            return everyone if self.price < self.config.on_demand_price else set()
        return self._allocate(
            self.rates, self.config.work_points, self.deadline_s, self.config.alpha
        )

    def _allocate(self, rates: list[float], work: float, time_s: float, alpha: float) -> set[int]:
        return set(allocate(rates, work, time_s, alpha, self.price, self.config.on_demand_price))

    def _report_progress(self, now: float) -> None:
        """One line per tenth of the batches processed."""
        done_fraction = self.processed / self.config.batches
        if int(done_fraction * 10) > self.reported_tenths:
            self.reported_tenths = int(done_fraction * 10)
            self.say(
                f"[{self.policy}] {self.processed}/{self.config.batches} batches "
                f"({done_fraction:.0%}) t={now:.1f}s of deadline {self.deadline_s:.1f}s "
                f"cost=${self.meter.cost:.5f} spot={len(self.spot)}/{self.config.workers} "
                f"running={sum(s.up for s in self.fleet.slots)}"
            )

    async def _reallocate(self, now: float, price_changed: bool) -> None:
        """static: at a price change, the formula again; adaptive: at every call."""
        if self.policy == "static" and price_changed:
            self.spot = self._allocate(
                self.rates, self.config.work_points, self.deadline_s, self.config.alpha
            )
        elif self.policy == "adaptive":
            await self._adapt(now)

    async def _adapt(self, now: float) -> None:
        """Re-estimate λ (arrivals / up time), α (up time / spot time), the remaining work
        and time, and re-allocate."""
        rates = estimated_rates(
            await self.fleet.stats(), self.config.rates == "homogeneous", self.config.rate
        )
        alpha = self.meter.observed_alpha
        remaining = (self.config.batches - self.processed) * self.config.batch_size
        self.spot = self._allocate(rates, remaining, self.deadline_s - now, alpha)

    # --- preemption, replacement, billing -------------------------------------------------

    def _step_chains(self, now: float) -> None:
        before = self.chain_up
        self.chain_up = self.chains.step()
        for index, (was, is_up) in enumerate(zip(before, self.chain_up, strict=True)):
            if was != is_up and index in self.spot:
                self.events.append(
                    {"t": now, "worker": index, "event": "recovered" if is_up else "preempted"}
                )

    def _watch_lost(self, now: float) -> None:
        """A worker lost for real is replaced at once and counts as preempted until its
        fresh actor answers."""
        for slot in self.fleet.lost():
            self.events.append({"t": now, "worker": slot.index, "event": "lost"})
            self.say(f"[{self.policy}] worker {slot.index} lost; replacing it")
            self.fleet.replace(slot, kill=False)
            self.lost.add(slot.index)
        for index in self.fleet.started():
            if index in self.lost:
                self.lost.discard(index)
                self.events.append({"t": now, "worker": index, "event": "back"})

    def _should_run(self, slot: Slot) -> bool:
        if slot.index in self.lost:
            return False
        return slot.index not in self.spot or self.chain_up[slot.index]

    def _apply_states(self, now: float) -> bool:
        changed = False
        for slot in self.fleet.slots:
            run = self._should_run(slot)
            if run == slot.up:
                continue
            changed = True
            if not run and slot.index in self.spot and slot.index not in self.lost:
                self.preemptions += 1
                if self.config.preemption == "kill":
                    self.fleet.replace(slot, kill=True)
                    continue
            self.fleet.set_up(slot, run)
        return changed

    def _bill(self, until: float) -> None:
        """Charge the time since the last bill at the current states and spot price."""
        self.meter.charge_until(
            until,
            on_demand=sum(
                1 for i in range(self.config.workers) if i not in self.spot and i not in self.lost
            ),
            spot=len(self.spot),
            spot_up=sum(1 for s in self.fleet.slots if s.index in self.spot and s.up),
            spot_rate=sum(self.rates[i] for i in self.spot),
            spot_price=self.price,
        )

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

    async def _result(self, run_id: str, finish_s: float) -> PolicyResult:
        ps_report = await self.servers.parameter_server.report.remote()
        await self.servers.evaluator.evaluate.remote(
            run_id, ps_report["weights"], ps_report["processed"]
        )
        tests = await self.servers.evaluator.take_rows.remote(run_id)
        updates = ps_report["updates"]
        overheads = [1.0 - u["compute_s"] / u["update_s"] for u in updates if u["update_s"] > 0]
        config, mean_price = self.config, self.servers.mean_spot_price
        summary = {
            "cost": self.meter.cost,
            "cost_bound": None
            if self.policy == "on-demand"
            else cost_bound(
                config.deadline_factor, config.alpha, mean_price, config.on_demand_price
            ),
            "cost_expected": predicted_cost_ratio(
                self.rates,
                self.meter.spot_s / finish_s,
                self.meter.spot_rate_s / finish_s,
                config.alpha,
                mean_price,
                config.on_demand_price,
            ),
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
            f"{self.policy}_timeline": self.timeline,
            f"{self.policy}_test": tests,
            f"{self.policy}_updates": updates,
            f"{self.policy}_events": self.events,
        }
        return PolicyResult(summary, records)
