"""measure-link: bring a lab up, stream across its site link both ways, tear it down."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from netem.lab import LabDescription, two_site_lab
from netem.lab.lab import Progress, print_progress
from netem.profile import Profile
from vocab.burst import SITE_CLOUD, SITE_ONPREM

PROBE_PORT = 5201
DIRECTIONS = ((SITE_ONPREM, SITE_CLOUD), (SITE_CLOUD, SITE_ONPREM))


class MeasurementError(RuntimeError):
    """A stream across the lab link did not complete."""


def measure_link(profile: Profile, out_dir: Path, *, kind: str = "auto",
                 seconds: float = 4.0, progress: Progress = print_progress) -> dict[str, Any]:
    """Measure both directions of a fresh lab's link; writes and returns link.json's content."""
    with two_site_lab(profile, kind=kind, progress=progress) as lab:
        measured = {}
        for source, target in DIRECTIONS:
            direction = f"{source}->{target}"
            progress(f"measuring {direction} for {seconds:g} s "
                     f"(target {lab.target_mbit[direction]:g} Mbit/s)")
            measured[direction] = round(stream_mbit(lab, source, target, seconds), 2)
    targets = lab.target_mbit
    link = {
        "lab": lab.kind,
        "profile": lab.profile,
        "target_mbit": targets[f"{SITE_ONPREM}->{SITE_CLOUD}"]
        if len(set(targets.values())) == 1 else targets,
        "target_mbit_by_direction": targets,
        "measured_mbit": measured,
        "ratio": {d: round(measured[d] / targets[d], 3) for d in measured},
        "delay_applied": lab.delay_applied,
        "shaping": lab.shaping,
        "seconds_per_direction": seconds,
        "notes": lab.notes,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "link.json").write_text(json.dumps(link, indent=2) + "\n")
    return link


def stream_mbit(lab: LabDescription, source: str, target: str, seconds: float) -> float:
    """Payload Mbit/s of one TCP stream from `source` to `target` (the receiver's view)."""
    python = [sys.executable, "-m", "netem.linkprobe"]
    pace = ([] if lab.kind == "netns"
            else ["--rate-mbit", str(lab.target_mbit[f"{source}->{target}"])])
    receiver = subprocess.Popen(
        lab.command([*python, "receive", "--port", str(PROBE_PORT)], site=target),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        _await_ready(receiver, timeout_s=30)
        sender = lab.run(
            [*python, "send", "--host", lab.node_ip(target), "--port", str(PROBE_PORT),
             "--seconds", str(seconds), *pace],
            site=source, capture_output=True, text=True, timeout=seconds + 60,
        )
        if sender.returncode != 0:
            raise MeasurementError(f"sender {source}->{target} failed: {sender.stderr[-800:]}")
        out, err = receiver.communicate(timeout=60)
        if receiver.returncode != 0:
            raise MeasurementError(f"receiver at {target} failed: {err[-800:]}")
        rate: float = json.loads(out.strip().splitlines()[-1])["mbit"]
        return rate
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()


def _await_ready(receiver: subprocess.Popen[str], timeout_s: float) -> None:
    assert receiver.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([receiver.stdout], [], [], 0.2)
        if ready:
            line = receiver.stdout.readline()
            if line and json.loads(line).get("ready"):
                return
            raise MeasurementError(f"receiver did not start: {line!r} "
                                   f"{receiver.stderr.read() if receiver.stderr else ''}")
        if receiver.poll() is not None:
            raise MeasurementError("receiver exited before it was ready")
    raise MeasurementError(f"receiver not ready within {timeout_s:g} s")


def format_table(link: dict[str, Any]) -> str:
    rows = [f"{'direction':<16}{'target Mbit/s':>15}{'measured':>12}{'ratio':>8}"]
    for direction, measured in link["measured_mbit"].items():
        target = link["target_mbit_by_direction"][direction]
        rows.append(f"{direction:<16}{target:>15g}{measured:>12.1f}"
                    f"{link['ratio'][direction]:>8.3f}")
    rows.append(f"lab: {link['lab']}, profile {link['profile']}, delay applied: "
                f"{link['delay_applied']}")
    return "\n".join(rows)
