"""The few numbers a run is for, as a short table printed at its end (before the folder).

Each workload declares its headline here, once: what the README's "the default run shows"
column promises, read from the run's `summary.json` (nothing is computed that the summary
does not hold). A headline is a table with one row per item (DOLL's policies, burst's
schedulers, inference's jobs) and/or lines of single values (burst's speedup, elastic's steps
lost); a value the summary lacks shows as `-`, so an older or partial summary still renders.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MISSING = "-"


def _number(digits: int) -> Callable[[Any], str]:
    return lambda value: f"{value:.{digits}f}"


def _yes(value: Any) -> str:
    return "yes" if value else "NO"


def _seconds(value: Any) -> str:
    return f"{value:.1f} s"


def _dollars(value: Any) -> str:
    return f"${value:.4f}"


def _times(value: Any) -> str:
    return f"{value:.2f}x"


@dataclass(frozen=True)
class Value:
    """One number of the headline: its title, where it is in the summary (a dotted path,
    or a function of the summary, or of the row's item) and how it is written."""

    title: str
    key: str | Callable[[dict[str, Any]], Any]
    text: Callable[[Any], str] = str

    def read(self, source: dict[str, Any]) -> str:
        try:
            if callable(self.key):
                value = self.key(source)
            else:
                value = source
                for part in self.key.split("."):
                    value = value[part]
        except (KeyError, TypeError, IndexError, ZeroDivisionError):
            return MISSING
        if value is None:
            return MISSING
        try:
            return self.text(value)
        except (TypeError, ValueError):
            return str(value)


@dataclass(frozen=True)
class Headline:
    """A workload's headline: `rows` names the summary's dict of items (one table row each,
    labelled `label`), `columns` the values of each row; `values` are single lines."""

    rows: str | None = None
    label: str = ""
    columns: tuple[Value, ...] = ()
    values: tuple[Value, ...] = ()


def _deadline_met(policy: dict[str, Any]) -> Any:
    if "deadline_met" in policy:
        return policy["deadline_met"]
    return policy["finish_s"] <= policy["deadline_s"]


def _answered_once(job: dict[str, Any]) -> str:
    return f"{job['answered']}/{job['queries']}"


def _notices(summary: dict[str, Any]) -> str:
    return f"{summary['notices_honoured']}/{summary['notices']}"


def _steps(summary: dict[str, Any]) -> str:
    total = summary["total_steps"]
    return f"{summary['steps_done']}" + ("" if total is None else f"/{total}")


def _replacements(summary: dict[str, Any]) -> str:
    """Survivor mode's replica groups replaced: how many rejoined, the survivors' steps in
    each replacement."""
    rows = summary["replacements"]
    rejoined = sum(1 for row in rows if row["rejoin_t"] is not None)
    steps = ", ".join(str(row["survivor_steps"]) for row in rows)
    return f"{len(rows)}, {rejoined} rejoined; steps the others committed meanwhile: {steps or '-'}"


def _spread(summary: dict[str, Any]) -> str:
    spread = summary["rate_spread_after_window"]
    return f"median {spread['median']:.3f}, max {spread['max']:.3f} (1 = equal rates)"


def _percent(value: Any) -> str:
    return f"{value:.1%}"


def _interval(key: str, percent: bool = False) -> Callable[[dict[str, Any]], Any]:
    def read(row: dict[str, Any]) -> str:
        low, high = row[key]
        return f"{_percent(low)}–{_percent(high)}" if percent else f"{low:.3f}–{high:.3f}"
    return read


def _runs(row: dict[str, Any]) -> str:
    return f"{row['runs']} ({row['failed']})"


HEADLINES: dict[str, Headline] = {
    "doll": Headline(
        rows="policies", label="policy",
        columns=(Value("cost ratio", "cost_ratio", _number(3)),
                 Value("deadline met", _deadline_met, _yes),
                 Value("finish", "finish_s", _seconds),
                 Value("deadline", "deadline_s", _seconds),
                 Value("preemptions", "preemptions"),
                 Value("accuracy", "accuracy", _number(3))),
    ),
    "sim-doll": Headline(
        rows="policies", label="policy",
        columns=(Value("cost ratio", "cost_ratio", _number(3)),
                 Value("95 % interval", _interval("cost_ratio_ci95")),
                 Value("deadline missed", "deadline_miss_rate", _percent),
                 Value("95 % interval", _interval("deadline_miss_rate_ci95", percent=True)),
                 Value("finish/deadline p50", "finish_over_deadline.p50", _number(3)),
                 Value("runs (failed)", _runs)),
    ),
    "burst": Headline(
        rows="runs", label="scheduler",
        columns=(Value("makespan", "makespan_s", _seconds),
                 Value("vs bound", "makespan_over_bound", _times),
                 Value("tasks on cloud", "tasks_on_cloud")),
        values=(Value("lower bound", "lower_bound_s", _seconds),
                Value("speedup (default / data-aware)", "speedup", _times)),
    ),
    "inference": Headline(
        rows="exactly_once.jobs", label="job",
        columns=(Value("answered once", _answered_once),
                 Value("lost", "lost"), Value("duplicated", "duplicated"),
                 Value("exactly once", "ok", _yes)),
        values=(Value("throughput", "throughput_qps", lambda qps: f"{qps:.0f} queries/s"),
                Value("fair-share rate spread", _spread),
                Value("every query answered exactly once", "exactly_once.ok", _yes),
                Value("workers killed", "failures_seen.workers_killed"),
                Value("coordinator killed", "failures_seen.coordinator_killed", _yes)),
    ),
    "elastic": Headline(
        values=(Value("steps done", _steps),
                Value("steps lost", "lost_steps"),
                Value("preemptions", "preemptions"),
                Value("notices honoured", _notices),
                Value("replacements", _replacements),
                Value("cost", "cost.cost_usd", _dollars),
                Value("all on demand", "cost.all_on_demand_cost_usd", _dollars)),
    ),
    "example": Headline(
        values=(Value("π", "pi", _number(5)), Value("error", "abs_error", _number(5)),
                Value("points", "points"), Value("tasks", "tasks")),
    ),
    "rl": Headline(
        values=(Value("env steps", "env_steps"),
                Value("final evaluation return", "last_eval_return", _number(1)),
                Value("best evaluation return", "best_eval_return", _number(1)),
                Value("preemptions", "preemptions"),
                Value("env runners replaced", "env_runners_replaced"),
                Value("cost", "cost", _dollars),
                Value("all on demand", "all_on_demand_cost", _dollars)),
    ),
}


def _item_rows(summary: dict[str, Any], path: str) -> dict[str, Any]:
    found: Any = summary
    for part in path.split("."):
        found = found.get(part, {}) if isinstance(found, dict) else {}
    return found if isinstance(found, dict) else {}


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def render_headline(workload: str, summary: dict[str, Any]) -> str:
    """The workload's headline table from its summary (see the module docstring)."""
    headline = HEADLINES[workload]
    lines: list[str] = []
    if headline.rows is not None:
        items = _item_rows(summary, headline.rows)
        table = [[headline.label, *(value.title for value in headline.columns)]]
        table += [[name, *(value.read(item) for value in headline.columns)]
                  for name, item in items.items() if isinstance(item, dict)]
        lines += _aligned(table)
    if headline.values:
        lines += _aligned([[value.title, value.read(summary)] for value in headline.values])
    return "\n".join(lines)


def headline_of(workload: str, folder: Path) -> str:
    """The headline of the run whose results are in `folder` (empty if it has no summary)."""
    try:
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return ""
    return render_headline(workload, summary) if isinstance(summary, dict) else ""
