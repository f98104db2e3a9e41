"""What a lab's events say: per preemption, the delays a spot workload lives with, and the
rows of a run's `spotlab/preemptions.jsonl` (vocab/preemptions.py)."""

from __future__ import annotations

import statistics
from typing import Any

from spotlab.state import CONDITION_TEXT, STALE
from vocab.preemptions import CAUSE_NOTICE, CAUSE_REBALANCE, preemption_record
from vocab.shared_data import SHARED_ENV


def preemptions(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per notice: seconds from the notice to its agent's drain (accepted by the
    GCS), to Ray listing the node as draining, to the node's death in Ray, to the kill at the
    deadline, and to the replacement's join (and from the kill to that join)."""
    rows = []
    for notice in (e for e in events if e["event"] == "notice"):
        node = notice["node"]

        def after(kind: str, node: str = node, since: float = notice["t"]) -> float | None:
            found = [e["t"] for e in events if e["event"] == kind and e["node"] == node
                     and e["t"] >= since and _accepted(e)]
            return round(found[0] - since, 3) if found else None

        replacement = next((e for e in events if e["event"] == "join"
                            and e.get("replaces") == node), None)
        kill = after("kill")
        join = round(replacement["t"] - notice["t"], 3) if replacement else None
        rows.append({
            "node": node,
            "warning_s": notice["warning_s"],
            "to_agent_drain_s": after("agent-drain"),
            "to_draining_s": after("draining"),
            "to_dead_s": after("dead"),
            "to_kill_s": kill,
            "replacement": replacement["node"] if replacement else None,
            "to_join_s": join,
            "kill_to_join_s": round(join - kill, 3) if join is not None and kill is not None
            else None,
        })
    return rows


def summary(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians and ranges over the preemptions recorded so far."""
    rows = preemptions(events)
    result: dict[str, Any] = {"preemptions": len(rows)}
    for key in ("to_agent_drain_s", "to_draining_s", "to_dead_s", "to_kill_s",
                "kill_to_join_s"):
        values = [row[key] for row in rows if row[key] is not None]
        if values:
            result[key] = {"median": round(statistics.median(values), 3),
                           "min": min(values), "max": max(values), "n": len(values)}
    return result


def _accepted(event: dict[str, Any]) -> bool:
    """An agent's drain counts once the GCS accepted it; every other event counts."""
    return event["event"] != "agent-drain" or bool(event.get("accepted"))


def preemption_records(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's `spotlab/preemptions.jsonl` from its lab's events: one row per node that got its
    interruption notice, or that the node group drained after a rebalance recommendation
    before any notice came (cause `rebalance`)."""
    rows = []
    ended = [e for e in events if e["event"] in ("notice", "rebalance-drain")]
    for end in ended:
        node = end["node"]
        if end["event"] == "rebalance-drain" and any(
                e["event"] == "notice" and e["node"] == node for e in events):
            continue  # a notice came too: counted once, as the notice's

        def first(kind: str, node: str = node, **match: Any) -> dict[str, Any] | None:
            return next((e for e in events if e["event"] == kind and e["node"] == node
                         and all(e.get(key) == value for key, value in match.items())), None)

        rebalance = first("rebalance")
        notice = first("notice")
        # Ray had it draining once the GCS accepted a drain (an idle node ends at once,
        # before anyone reads the draining table) or once it was seen in that table
        drains = [e["t"] for e in (first("agent-drain", accepted=True), first("draining"))
                  if e is not None]
        kill = first("kill")
        joined = next((e for e in events if e["event"] == "join"
                       and e.get("replaces") == node), None)
        scheduled = (notice or {}).get("scheduled_at") or (rebalance or {}).get("scheduled_at")
        rows.append(preemption_record(
            scheduled_at=scheduled,
            rebalance_at=rebalance["t"] if rebalance else None,
            notice_at=notice["t"] if notice else None,
            drain_seen_at=min(drains, default=None),
            gone_at=kill["t"] if kill else None,
            replacement_joined_at=joined["t"] if joined else None,
            cause=CAUSE_NOTICE if notice else CAUSE_REBALANCE,
            node=node,
            ray_node_id=end.get("ray_node_id"),
            pool=end.get("pool"),
            instance_id=node,
        ))
    return rows


def format_status(status: dict[str, Any]) -> str:
    """spot-lab-status's text: the nodes, the events, the measured delays, the bill."""
    lab_id = status["lab_id"]
    if status["condition"] == STALE:
        lines = [f"spot lab {lab_id}: STALE (supervisor gone): nothing runs it any more; remove "
                 f"its record with `invoke spot-lab-down --lab {lab_id}`"]
    else:
        lines = [f"spot lab {lab_id}: {status['condition']}, supervisor "
                 f"{'running' if status['supervisor_alive'] else 'not running yet'}"]
    description = status.get("description") or {}
    if description:
        lines.append(f"  ray address {description['ray_address']}, dashboard "
                     f"{description['dashboard_url']} (token: RAY_AUTH_TOKEN_PATH="
                     f"{description['driver_env']['RAY_AUTH_TOKEN_PATH']})")
        shared = description["driver_env"].get(SHARED_ENV)
        if shared:
            lines.append(f"  shared folder {SHARED_ENV}={shared} (invoke data-ls --lab {lab_id})")
    lines.append("nodes:")
    for node in status["nodes"]:
        lines.append(f"  {node['name']:<10} {node['pool']:<10} pid {node['pid']}  processes "
                     f"alive {node['processes_alive']:<3} notice endpoint "
                     f"{node['notice_endpoint']}")
    lines.append("events:")
    start = status["events"][0]["t"] if status["events"] else 0.0
    for event in status["events"]:
        extra = {k: v for k, v in event.items()
                 if k not in ("t", "event", "node", "pool", "slot", "ray_node_id")}
        lines.append(f"  +{event['t'] - start:8.2f} s  {event['event']:<20} {event['node']:<10}"
                     f" {extra if extra else ''}".rstrip())
    lines.append(f"measured: {summary(status['events'])}")
    if status.get("billing"):
        lines.append(f"bill so far: {status['billing']}")
    others = status.get("other_labs") or []
    if others:
        listing = ", ".join(f"{lab['lab_id']} ({CONDITION_TEXT[lab['condition']]})"
                            for lab in others)
        lines.append(f"other spot labs recorded: {listing}; see one with --lab ID")
    return "\n".join(lines)
