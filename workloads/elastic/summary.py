"""The run's headline numbers, from the ledger's records alone (pure: no Ray)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from workloads.elastic.scaling import measured_throughput


def summarize(record: dict[str, Any], started: float, ended: float) -> dict[str, Any]:
    """Steps, lost steps (steps computed more than once), restarts with their cause, lost
    steps and time to resume, notices (worker groups that saw one) and those honoured,
    worker counts over time."""
    steps, attempts = record["steps"], record["attempts"]
    executions = Counter(row["step"] for row in steps)
    total = record.get("total_steps")
    restarts = [_restart(record, attempt, started) for attempt in attempts[1:]]
    noticed = sorted({n["attempt"] for n in record["notices"]})
    honoured = [attempt for attempt in noticed if _honoured(record, attempt)]
    final = {k: v for k, v in record["final"].items() if k != "t"}
    return {
        "total_steps": total,
        "steps_done": len(executions),
        "step_executions": sum(executions.values()),
        "completed": total is not None and set(executions) == set(range(total)),
        "lost_steps": sum(count - 1 for count in executions.values()),
        "preemptions": sum(1 for r in restarts if r["cause"] == "preemption"),
        "restarts": restarts,
        "notices": len(noticed),
        "notices_honoured": len(honoured),
        "checkpoints": Counter(c["reason"] for c in record["checkpoints"]),
        "rescales": [{"t": r["t"], "cause": r["cause"], "workers_before": r["workers_before"],
                      "workers_after": r["workers_after"]}
                     for r in restarts if r["workers_before"] != r["workers_after"]],
        "worker_counts": [{"t": a["t"] - started, "workers": a["world_size"]}
                          for a in attempts],
        "throughput_steps_per_s": {str(size): value for size, value
                                   in sorted(measured_throughput(steps).items())},
        "worker_count_decisions": [{**d, "t": d["t"] - started}
                                   for d in record.get("decisions", [])],
        "final_metrics": final,
        "started_at": started,
        "ended_at": ended,
        "wall_time_s": ended - started,
    }


def _restart(record: dict[str, Any], attempt: dict[str, Any], started: float
             ) -> dict[str, Any]:
    """One restart: what it resumed from, the steps it threw away, how long it took."""
    number = attempt["attempt"]
    before = [s for s in record["steps"] if s["attempt"] < number]
    after = [s for s in record["steps"] if s["attempt"] == number]
    previous = [s for s in before if s["attempt"] == number - 1]
    noticed = [n for n in record["notices"] if n["attempt"] == number - 1]
    resized = [c for c in record["checkpoints"]
               if c["attempt"] == number - 1 and c["reason"] == "resize"]
    size_before, size_after = record["attempts"][number - 1]["world_size"], attempt["world_size"]
    last_done = max((s["step"] for s in before), default=-1)
    resumed = attempt["resumed_from_step"]
    stopped_at = min([n["t"] for n in noticed] or [previous[-1]["t"] if previous else
                                                   attempt["t"]])
    return {
        "attempt": number,
        "t": attempt["t"] - started,
        "cause": "preemption" if noticed else ("grow" if size_after > size_before else "shrink")
        if resized else "resize or failure",
        "workers_before": size_before,
        "workers_after": size_after,
        "resumed_from_step": resumed,
        "last_step_before": last_done,
        "lost_steps": last_done - (-1 if resumed is None else resumed),
        "time_to_resume_s": (after[0]["t"] - stopped_at) if after else None,
    }


def _honoured(record: dict[str, Any], attempt: int) -> bool:
    """The notice a worker group saw is honoured when every step completed by the node's
    deadline (the earliest any of its ranks saw; Ray's drain alone: by the group's end) is
    in a checkpoint that landed before it: the notice checkpoint, or an earlier one when
    the group had computed nothing since (a notice while it started, or held)."""
    deadlines = [n["deadline"] for n in record["notices"]
                 if n["attempt"] == attempt and n.get("deadline")]
    deadline = min(deadlines, default=float("inf"))
    done = [s["step"] for s in record["steps"] if s["attempt"] <= attempt and s["t"] <= deadline]
    saved = [c["step"] for c in record["checkpoints"]
             if c["attempt"] <= attempt and c["t"] <= deadline]
    return not done or max(saved, default=-1) >= max(done)
