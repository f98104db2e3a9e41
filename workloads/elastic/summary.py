"""The run's headline numbers, from the ledger's records alone (pure: no Ray).

A step counts once per worker group that completed it, whichever rank recorded it; a step
completed by more than one group was computed again after a restart: a lost step. A notice
is honoured when every step its group completed by the node's deadline is in a checkpoint
Ray Train committed by then (nothing to save counts: a notice before the group's first step).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from workloads.elastic.scaling import measured_throughput


def summarize(record: dict[str, Any], started: float, ended: float, metric: str | None = None,
              failed: bool = False) -> dict[str, Any]:
    steps = record["steps"]
    attempts = sorted(record["attempts"], key=lambda a: a["attempt"])
    by_step: dict[int, set[int]] = defaultdict(set)
    for row in steps:
        by_step[row["step"]].add(row["attempt"])
    executions = {step: len(groups) for step, groups in by_step.items()}
    total = record.get("total_steps")
    restarts = [_restart(record, attempt, attempts[index], started)
                for index, attempt in enumerate(attempts[1:])]
    notices = [notice for notice in (_notice(record, attempt, started) for attempt in attempts)
               if notice is not None]
    failures = start_failures(record, started)
    notices += [{"attempt": None, "group": f["group"], "t": f["t"], "deadline": None,
                 "during_startup": True, "steps_before_deadline": 0, "checkpoint_step": None,
                 "reported": None, "committed": None, "honoured": True,
                 "why": "its node was preempted while the group started: nothing computed"}
                for f in failures if f["cause"] == "preemption"]
    commits = record.get("commits", [])
    final = {k: v for k, v in record["final"].items() if k != "t"}
    if not final:  # the script's last report with metrics
        final = next((dict(c["metrics"]) for c in reversed(commits) if c["metrics"]), {})
    done = set(executions)
    return {
        "total_steps": total,
        "step_unit": "step" if any(row["kind"] == "step" for row in steps) else "report",
        "steps_done": len(done),
        "step_executions": sum(executions.values()),
        "completed": not failed and (total is None or done >= set(range(total))),
        "lost_steps": sum(count - 1 for count in executions.values()),
        "preemptions": sum(1 for r in restarts if r["cause"] == "preemption")
        + sum(1 for f in failures if f["cause"] == "preemption"),
        "restarts": restarts,
        "start_failures": failures,
        **notices_and_checkpoints(notices, record),
        "rescales": [{"t": r["t"], "cause": r["cause"], "workers_before": r["workers_before"],
                      "workers_after": r["workers_after"]}
                     for r in restarts if r["workers_before"] != r["workers_after"]],
        "worker_counts": [{"t": a["t"] - started, "workers": a["world_size"]}
                          for a in attempts],
        "worker_groups_started": len(record.get("groups", [])),
        "throughput_steps_per_s": {str(size): value for size, value
                                   in sorted(measured_throughput(first_rows(steps)).items())},
        "worker_count_decisions": [{**d, "t": d["t"] - started}
                                   for d in record.get("decisions", [])],
        "preemption_schedule": [{**row, "t": row["t"] - started}
                                for row in record.get("schedule", [])],
        "hints": sorted({h["hint"] for h in record.get("hints", [])}),
        "metric": metric or first_metric(record),
        "final_metrics": final,
        "started_at": started,
        "ended_at": ended,
        "wall_time_s": ended - started,
    }


def notices_and_checkpoints(notices: list[dict[str, Any]], record: dict[str, Any]
                            ) -> dict[str, Any]:
    """The summary's notice counts (from each notice's detail) and its checkpoints, by the
    reason they were reported and committed."""
    return {
        "notices": len(notices),
        "notices_honoured": sum(1 for n in notices if n["honoured"]),
        "notices_during_startup": sum(1 for n in notices if n["during_startup"]),
        "notice_details": notices,
        "checkpoints": dict(Counter(r["reason"] for r in record["reports"]
                                    if r.get("checkpoint"))),
        "checkpoints_committed": sum(1 for c in record.get("commits", [])
                                     if c.get("checkpoint")),
    }


def first_rows(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per step and group (the first rank's to record it)."""
    seen: set[tuple[int, int]] = set()
    rows = []
    for row in sorted(steps, key=lambda r: r["t"]):
        key = (row["attempt"], row["step"])
        if key not in seen:
            seen.add(key)
            rows.append(row)
    return rows


METRIC_SKIP = {"step", "t", "t_run", "attempt", "rank", "world_size", "kind"}


def first_metric(record: dict[str, Any]) -> str | None:
    """The first numeric metric the script reported (or ElasticLoop recorded)."""
    rows = [c["metrics"] for c in sorted(record.get("commits", []), key=lambda c: c["t"])]
    rows += [s for s in sorted(record["steps"], key=lambda s: s["t"])]
    for row in rows:
        for key, value in row.items():
            if key not in METRIC_SKIP and isinstance(value, int | float) \
                    and not isinstance(value, bool):
                return str(key)
    return None


def _group_end(record: dict[str, Any], group: int) -> float | None:
    """When the next worker group was placed (or began), after this one."""
    later = [a["t"] for a in record["attempts"] if a["attempt"] > group]
    later += [g["t"] for g in record.get("groups", []) if g["group"] > group]
    return min(later, default=None)


def _life_rows(record: dict[str, Any], group: int, since: float) -> list[dict[str, Any]]:
    """The controller's rows while the group lived (until the next group was placed)."""
    end = _group_end(record, group)
    return [c for c in record.get("controller", [])
            if since <= c["t"] and (end is None or c["t"] < end)]


def start_failures(record: dict[str, Any], started: float) -> list[dict[str, Any]]:
    """Worker groups placed that never began training (a node lost while they started, or a
    placement that timed out), and why."""
    began = {a["attempt"] for a in record["attempts"]}
    failed = []
    for group in record.get("groups", []):
        if group["group"] in began:
            continue
        rows = _life_rows(record, group["group"], group["t"])
        failed.append({"group": group["group"], "t": group["t"] - started,
                       "workers": group["world_size"],
                       "cause": "preemption" if any(c.get("preemption") for c in rows)
                       else "failure",
                       "error": next((c["error"] for c in rows if c.get("error")), None)})
    return failed


def _notice(record: dict[str, Any], attempt: dict[str, Any], started: float
            ) -> dict[str, Any] | None:
    """The notice a group saw (a rank's metadata notice, the ranks' agreement, or Ray Train's
    preemption state while the group lived), and whether it was honoured; None: no notice."""
    number = attempt["attempt"]
    end = _group_end(record, number)
    rows = [n for n in record["notices"] if n["attempt"] == number]
    preempting = [c for c in record.get("controller", []) if c["state"] == "PREEMPTING"
                  and attempt["t"] <= c["t"] and (end is None or c["t"] < end)]
    if not rows and not preempting:
        return None
    seen = min([n["t"] for n in rows] + [c["t"] for c in preempting])
    deadlines = [n["deadline"] for n in rows if n.get("deadline")]
    deadlines += [c["deadline"] for c in preempting if c.get("deadline")]
    deadline = min(deadlines, default=end)
    mine = first_rows([s for s in record["steps"] if s["attempt"] == number])
    first_step = min((s["t"] for s in mine), default=None)
    done = [s["step"] for s in mine if deadline is None or s["t"] <= deadline]
    reports = [r for r in record["reports"] if r["attempt"] == number and r.get("checkpoint")]
    commits = {c["checkpoint"]: c["t"] for c in record.get("commits", []) if c.get("checkpoint")}
    detail: dict[str, Any] = {
        "attempt": number, "t": seen - started,
        "deadline": None if deadline is None else deadline - started,
        "during_startup": first_step is None or seen < first_step,
        "steps_before_deadline": len(done), "checkpoint_step": None, "reported": None,
        "committed": None,
    }
    if not done:
        return {**detail, "honoured": True,
                "why": "no step computed since the checkpoint the group resumed from"}
    needed = max(done) + 1
    covering = [r for r in reports if r["steps_covered"] >= needed]
    if not covering:
        newest = max((r["steps_covered"] for r in reports), default=0)
        why = f"no checkpoint of step {needed - 1} was reported"
        if newest:
            why += f" (the group's newest covers up to step {newest - 1})"
        if not any(s["kind"] == "step" for s in mine):
            why += ": the script does not call checkpoint_due()"
        return {**detail, "honoured": False, "why": why}
    report = min(covering, key=lambda r: r["t"])
    committed = commits.get(report["checkpoint"])
    detail.update(checkpoint_step=report["steps_covered"] - 1, reported=report["t"] - started,
                  committed=None if committed is None else committed - started)
    if committed is not None and (deadline is None or committed <= deadline):
        return {**detail, "honoured": True,
                "why": f"step {needed - 1} committed by Ray Train "
                       f"{(deadline - committed) if deadline else 0:.1f} s before the deadline"}
    if committed is None:
        why = (f"the checkpoint of step {needed - 1} was reported "
               f"{(deadline - report['t']) if deadline else 0:.1f} s before the deadline but "
               f"Ray Train never committed it")
    else:
        why = (f"Ray Train committed the checkpoint of step {needed - 1} "
               f"{committed - (deadline or committed):.1f} s after the deadline")
    return {**detail, "honoured": False, "why": why}


def _restart(record: dict[str, Any], attempt: dict[str, Any], previous: dict[str, Any],
             started: float) -> dict[str, Any]:
    """One restart: why, what it resumed from, the steps it threw away, how long it took."""
    number, before_number = attempt["attempt"], previous["attempt"]
    steps = record["steps"]
    before = [s for s in steps if s["attempt"] < number]
    after = first_rows([s for s in steps if s["attempt"] == number])
    previous_steps = [s for s in steps if s["attempt"] == before_number]
    noticed = [n for n in record["notices"] if n["attempt"] == before_number]
    window = _life_rows(record, before_number, previous["t"])
    preempted = any(c["state"] == "PREEMPTING" or c.get("preemption") for c in window)
    resized = [r for r in record["reports"] if r["attempt"] == before_number
               and r.get("reason") == "resize"]
    size_before, size_after = previous["world_size"], attempt["world_size"]
    if noticed or preempted:
        cause = "preemption"
    elif resized or any(c["state"] == "RESIZING" for c in window):
        cause = "grow" if size_after > size_before else "shrink"
    else:
        cause = "failure"
    last_done = max((s["step"] for s in before), default=-1)
    resumed = int(attempt.get("resumed_steps", 0))
    stopped = [n["t"] for n in noticed] + [c["t"] for c in window if c["state"] == "PREEMPTING"]
    if not stopped:
        stopped = [max((s["t"] for s in previous_steps), default=attempt["t"])]
    return {
        "attempt": number,
        "t": attempt["t"] - started,
        "cause": cause,
        "workers_before": size_before,
        "workers_after": size_after,
        "resumed_from_step": resumed - 1 if resumed else None,
        "last_step_before": last_done,
        "lost_steps": max(0, last_done + 1 - resumed),
        "time_to_resume_s": (after[0]["t"] - min(stopped)) if after else None,
    }


def summarize_replicas(record: dict[str, Any], started: float, ended: float,
                       metric: str | None = None, failed: bool = False) -> dict[str, Any]:
    """Survivor mode's headline (workloads/elastic/replicas.py): a step is a torchft step (the
    `step` a group reports); it is computed again when one group reports it twice (a step
    that did not commit) or when a new generation of groups (every group lost at once,
    resumed from the checkpoint) reaches it again."""
    steps = sorted(record["steps"], key=lambda s: s["t"])
    joins = [r for r in record["resizes"] if r.get("event") == "join"]
    leaves = [r for r in record["resizes"] if r.get("event") == "leave"]
    generation = {j["replica_group"]: j.get("generation", 0) for j in joins}
    counts: dict[int, dict[int, Counter[int]]] = defaultdict(lambda: defaultdict(Counter))
    for row in steps:
        counts[generation.get(row["replica_group"], 0)][row["step"]][row["replica_group"]] += 1
    # torchft commits a generation's steps in order, so each step from its first to its newest
    # was computed, also one whose only rows died with a group killed before it sent them
    # (replicas.py sends rows in batches)
    executions: Counter[int] = Counter()
    for by_step in counts.values():
        for step in range(min(by_step), max(by_step) + 1):
            groups = by_step.get(step)
            executions[step] += max(groups.values()) if groups else 1
    notices: dict[int, float] = {}
    for row in sorted(record["notices"], key=lambda n: n["t"]):
        notices.setdefault(row["replica_group"], row["t"])
    preempted = [leave for leave in leaves if leave["cause"] in ("left", "lost")]
    stepped = {row["replica_group"] for row in steps}
    details = []
    for leave in preempted:
        group = leave["replica_group"]
        noticed = notices.get(group)
        if leave["cause"] == "left":
            honoured, why = True, "left after its step was committed"
        elif group not in stepped:
            honoured, why = True, "lost before its first step: nothing of its own computed"
        else:
            honoured, why = False, "lost with its node before it left"
        details.append({"replica_group": group, "t": (noticed or leave["t"]) - started,
                        "during_startup": group not in stepped, "honoured": honoured,
                        "why": why})
    final = next(({k: v for k, v in row.items() if k not in METRIC_SKIP | REPLICA_FIELDS}
                  for row in reversed(steps)), {})
    done = set(executions)
    return {
        "mode": "torchft",
        "total_steps": record.get("total_steps"),
        "step_unit": "step",
        "steps_done": len(done),
        "step_executions": sum(executions.values()),
        "completed": not failed and bool(done),
        "lost_steps": sum(count - 1 for count in executions.values()),
        "preemptions": len(preempted),
        "replacements": [replacement(leave, notices, joins, steps, started, ended)
                         for leave in preempted],
        "replica_groups_started": len(joins),
        "resumed_from_checkpoint": sum(1 for j in joins if j.get("resumed_from")),
        "start_failures": [],
        "restarts": [],
        **notices_and_checkpoints(details, record),
        "rescales": [],
        "worker_counts": replica_counts(joins, leaves, started),
        "preemption_schedule": [{**row, "t": row["t"] - started}
                                for row in record.get("schedule", [])],
        "hints": [],
        "metric": metric or first_metric(record),
        "final_metrics": final,
        "started_at": started,
        "ended_at": ended,
        "wall_time_s": ended - started,
    }


REPLICA_FIELDS = {"replica_group", "slot", "index", "steps_covered"}


def replacement(leave: dict[str, Any], notices: dict[int, float], joins: list[dict[str, Any]],
                steps: list[dict[str, Any]], started: float, ended: float) -> dict[str, Any]:
    """One preemption in survivor mode: the group and its notice, when it left, the group that
    took its slot (when a node came back) and its first step, and the steps the other groups
    committed in between."""
    group = leave["replica_group"]
    noticed = notices.get(group, leave["t"])
    after = next((j for j in joins if j["slot"] == leave["slot"] and j["t"] >= leave["t"]), None)
    first = None
    if after is not None:
        first = next((s["t"] for s in steps if s["replica_group"] == after["replica_group"]),
                     None)
    until = first if first is not None else ended
    survivors = {s["step"] for s in steps if s["replica_group"] != group
                 and (after is None or s["replica_group"] != after["replica_group"])
                 and noticed < s["t"] <= until}
    return {
        "replica_group": group, "slot": leave["slot"], "node_id": leave["node_id"],
        "cause": leave["cause"],
        "notice_t": noticed - started, "leave_t": leave["t"] - started,
        "replacement_group": None if after is None else after["replica_group"],
        "node_joined_t": None if after is None else after["node_seen"] - started,
        "join_t": None if after is None else after["t"] - started,
        "rejoin_t": None if first is None else first - started,
        "survivor_steps": len(survivors),
    }


def replica_counts(joins: list[dict[str, Any]], leaves: list[dict[str, Any]],
                   started: float) -> list[dict[str, Any]]:
    """Replica groups up over time: one row per join and leave."""
    events = sorted([(j["t"], 1) for j in joins] + [(leave["t"], -1) for leave in leaves])
    rows, count = [], 0
    for t, change in events:
        count += change
        rows.append({"t": t - started, "workers": count})
    return rows
