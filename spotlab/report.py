"""What a lab's events say: per preemption, the delays a spot workload lives with."""

from __future__ import annotations

import statistics
from typing import Any

from spotlab.state import CONDITION_TEXT, STALE


def preemptions(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per notice: seconds from the notice to Ray's drain, the node's death in Ray,
    the kill at the deadline, and the replacement's join (and from the kill to that join)."""
    rows = []
    for notice in (e for e in events if e["event"] == "notice"):
        node = notice["node"]

        def after(kind: str, node: str = node, since: float = notice["t"]) -> float | None:
            found = [e["t"] for e in events if e["event"] == kind and e["node"] == node]
            return round(found[0] - since, 3) if found else None

        replacement = next((e for e in events if e["event"] == "join"
                            and e.get("replaces") == node), None)
        kill = after("kill")
        join = round(replacement["t"] - notice["t"], 3) if replacement else None
        rows.append({
            "node": node,
            "warning_s": notice["warning_s"],
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
    for key in ("to_draining_s", "to_dead_s", "to_kill_s", "kill_to_join_s"):
        values = [row[key] for row in rows if row[key] is not None]
        if values:
            result[key] = {"median": round(statistics.median(values), 3),
                           "min": min(values), "max": max(values), "n": len(values)}
    return result


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
