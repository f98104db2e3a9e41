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

from workloads.common.spot_market.billing import Meter
from workloads.common.spot_market.preemption import MarkovAvailability
from workloads.doll.allocation import allocate, cost_bound, predicted_cost_ratio
from workloads.doll.chance import ChanceModel, OutageChain, chance_spot_set, deadline_probability
from workloads.doll.estimation import estimated_rates
from workloads.doll.fleet import Fleet, Slot
from workloads.doll.options import DollOptions

TIMELINE_EVERY_S = 0.5
ADAPTIVE = ("adaptive", "adaptive-paper")
STATIC = ("static", "static-paper")


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
        self.stand_ins: dict[int, float] = {}  # fallback: preempted slot -> stand-in asked at
        self.predictions: list[tuple[float, float]] = []  # (t, P(deadline met)) per decision
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
        self.fleet.begin(config.seed, keep_backlog=self.policy == "fallback")
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
            spot: set[int] = set()
        elif self.policy in (*ADAPTIVE, "fallback"):
            spot = everyone if self.price < self.config.on_demand_price else set()
        else:
            return self._allocate_static(0.0)
        self._predict(0.0, self.rates, spot, self.config.work_points, self.deadline_s)
        return spot

    def _model(self, alpha: float) -> ChanceModel:
        config = self.config
        launch = (
            round(config.launch_delay_compressed_s / config.refresh_s)
            if self.policy == "fallback"
            else None
        )
        return ChanceModel(
            OutageChain.paper(alpha, config.refresh_s),
            config.batch_size,
            config.k,
            target=config.deadline_probability,
            launch_steps=launch,
        )

    def _predict(
        self,
        now: float,
        rates: list[float],
        spot: set[int],
        work: float,
        time_s: float,
    ) -> None:
        """Record the probability of meeting the deadline this decision has under the
        preemption model (the configured α, whatever α̂ the policy acted on)."""
        model = self._model(self.config.alpha)
        down = [not up for up in self.chain_up]
        probability = deadline_probability(
            rates, sorted(spot), work, time_s, model, down, from_start=self.processed == 0
        )
        self.predictions.append((now, probability))

    def _allocate_static(self, now: float) -> set[int]:
        """The whole run's allocation at the current price: the paper's expected-throughput
        formula (static-paper) or the chance constraint (static)."""
        config = self.config
        rates, work, time_s, alpha = self.rates, config.work_points, self.deadline_s, config.alpha
        if self.policy == "static-paper":
            spot = set(allocate(rates, work, time_s, alpha, self.price, config.on_demand_price))
        else:
            spot = set(
                chance_spot_set(
                    rates, work, time_s, self._model(alpha), self.price,
                    config.on_demand_price, alpha,
                )
            )
        self._predict(now, rates, spot, work, time_s)
        return spot

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
        """static: at a price change, the whole run's allocation again; adaptive: at every
        call; fallback: at a price change, all spot or (spot not cheaper) none."""
        if self.policy in STATIC and price_changed:
            self.spot = self._allocate_static(now)
        elif self.policy in ADAPTIVE:
            await self._adapt(now)
        elif self.policy == "fallback" and price_changed:
            cheaper = self.price < self.config.on_demand_price
            self.spot = set(range(self.config.workers)) if cheaper else set()

    async def _adapt(self, now: float) -> None:
        """Re-estimate λ (arrivals / up time), α (up time / spot time), the remaining work
        and time, and re-allocate: by the paper's expected throughput (adaptive-paper) or
        by the chance constraint from each worker's current state (adaptive)."""
        config = self.config
        stats = await self.fleet.stats()
        if sum(s[0] for s in stats if s is not None) < config.workers * config.batch_size:
            return  # under a batch per worker so far: too little to estimate λ from
        rates = estimated_rates(stats, config.rates == "homogeneous", config.rate)
        remaining = (config.batches - self.processed) * config.batch_size
        time_s = self.deadline_s - now
        if self.policy == "adaptive-paper":
            alpha = self.meter.observed_alpha
            self.spot = set(
                allocate(rates, remaining, time_s, alpha, self.price, config.on_demand_price)
            )
        else:
            alpha = self._alpha_with_prior()
            down = [not up for up in self.chain_up]
            self.spot = set(
                chance_spot_set(
                    rates, remaining, time_s, self._model(alpha), self.price,
                    config.on_demand_price, alpha, down, from_start=self.processed == 0,
                )
            )
        self._predict(now, rates, self.spot, remaining, time_s)

    def _alpha_with_prior(self) -> float:
        """α̂ = up time / spot time, with the configured α as a prior worth one worker over
        the whole deadline: early on, a few seconds without a preemption say little."""
        prior_s = self.deadline_s
        up_s = self.meter.spot_up_s + self.config.alpha * prior_s
        return min(up_s / (self.meter.spot_s + prior_s), 1.0)

    # --- preemption, replacement, billing -------------------------------------------------

    def _step_chains(self, now: float) -> None:
        before = self.chain_up
        self.chain_up = self.chains.step()
        for index, (was, is_up) in enumerate(zip(before, self.chain_up, strict=True)):
            if was != is_up and index in self.spot:
                self.events.append(
                    {"t": now, "worker": index, "event": "recovered" if is_up else "preempted"}
                )
        if self.policy == "fallback":
            self._track_stand_ins(now)

    def _track_stand_ins(self, now: float) -> None:
        """fallback: a preempted spot worker gets an on-demand stand-in, asked for at once
        and taking its stream over a launch delay later; released when spot returns."""
        for index in range(self.config.workers):
            needs = index in self.spot and not self.chain_up[index]
            if needs and index not in self.stand_ins:
                self.stand_ins[index] = now
            elif not needs and index in self.stand_ins:
                del self.stand_ins[index]
                self.events.append({"t": now, "worker": index, "event": "stand-in released"})

    def _stand_in_running(self, index: int, now: float) -> bool:
        asked = self.stand_ins.get(index)
        return asked is not None and now - asked >= self.config.launch_delay_compressed_s

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

    def _should_run(self, slot: Slot, now: float) -> bool:
        if slot.index in self.lost:
            return False
        if slot.index not in self.spot or self.chain_up[slot.index]:
            return True
        return self._stand_in_running(slot.index, now)

    def _apply_states(self, now: float) -> bool:
        changed = False
        for slot in self.fleet.slots:
            run = self._should_run(slot, now)
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
        """Charge the time since the last bill at the current states and spot price. A
        fallback stand-in is billed from the moment it is asked for (its launch included)."""
        if self.policy == "fallback":
            spot_up = sum(1 for i in self.spot if self.chain_up[i] and i not in self.lost)
        else:
            spot_up = sum(1 for s in self.fleet.slots if s.index in self.spot and s.up)
        self.meter.charge_until(
            until,
            on_demand=len(self.stand_ins)
            + sum(
                1 for i in range(self.config.workers) if i not in self.spot and i not in self.lost
            ),
            spot=len(self.spot),
            spot_up=spot_up,
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

    def _expected_ratio(self, finish_s: float) -> float:
        """The cost ratio the allocation held over the run predicts: a spot worker keeps α
        of its rate (fallback: all of it, with a stand-in paid for the other 1 − α)."""
        config, mean_price = self.config, self.servers.mean_spot_price
        spot_count = self.meter.spot_s / finish_s
        if self.policy == "fallback":
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

    def _reported_probability(self) -> float | None:
        """What the policy predicted when it made its plan: static/on-demand/fallback at the
        start; adaptive at its first re-estimation (its start, all spot, is no plan)."""
        index = 1 if self.policy in ADAPTIVE else 0
        return self.predictions[index][1] if len(self.predictions) > index else None

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
            if self.policy == "on-demand"
            else cost_bound(
                config.deadline_factor, config.alpha, mean_price, config.on_demand_price
            ),
            "deadline_probability": self._reported_probability(),
            "stand_in_s": self.meter.on_demand_s if self.policy == "fallback" else None,
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
            f"{self.policy}_timeline": self.timeline,
            f"{self.policy}_test": tests,
            f"{self.policy}_updates": updates,
            f"{self.policy}_events": self.events,
        }
        return PolicyResult(summary, records)
