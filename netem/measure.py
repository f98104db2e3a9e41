"""measure-link: bring a lab up, stream across its site link both ways, tear it down."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import procs
from netem.lab import two_site_lab
from netem.lab.lab import Progress, print_progress
from netem.linkprobe import READY
from netem.profile import Profile
from vocab.burst import SITE_CLOUD, SITE_ONPREM
from vocab.errors import RunFailed

PROBE_PORT = 5201
DIRECTIONS = ((SITE_ONPREM, SITE_CLOUD), (SITE_CLOUD, SITE_ONPREM))


class MeasurementError(RunFailed, RuntimeError):
    """A stream across the lab link did not complete."""


def measure_link(profile: Profile, out_dir: Path, *, seconds: float = 4.0,
                 progress: Progress = print_progress) -> dict[str, Any]:
    """Measure both directions of a fresh lab's link; writes and returns link.json's content.

    Rates are compared with what tc was given (the lab's shaping), not with the profile."""
    with two_site_lab(profile, progress=progress) as lab:
        shaped = lab.rate_mbit
        measured = {}
        for source, target in DIRECTIONS:
            direction = f"{source}->{target}"
            progress(f"measuring {direction} for {seconds:g} s "
                     f"(shaped to {shaped[direction]:g} Mbit/s)")
            measured[direction] = round(
                stream_mbit(lab.command([], site=source), lab.command([], site=target),
                            lab.node_ip(target), seconds), 2)
    link = {
        "lab": lab.kind,
        "profile": lab.profile,
        "shaping": lab.shaping,
        "measured_mbit": measured,
        "ratio": {d: round(measured[d] / shaped[d], 3) for d in measured},
        "seconds_per_direction": seconds,
        "notes": lab.notes,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "link.json").write_text(json.dumps(link, indent=2) + "\n")
    return link


def stream_mbit(send_at: list[str], receive_at: list[str], host: str, seconds: float,
                port: int = PROBE_PORT) -> float:
    """Payload Mbit/s of one TCP stream to `host` (the receiver's view); `send_at` and
    `receive_at` are the argv prefixes that put each end where it runs (a lab site, a
    namespace)."""
    python = [sys.executable, "-m", "netem.linkprobe"]
    receiver = procs.spawn([*receive_at, *python, "receive", "--port", str(port)])
    try:
        procs.wait_for_line(receiver, READY, timeout_s=30, name="link receiver", drain=False)
        sender = subprocess.run(
            [*send_at, *python, "send", "--host", host, "--port", str(port),
             "--seconds", str(seconds)],
            capture_output=True, text=True, timeout=seconds + 60, check=False,
        )
        if sender.returncode != 0:
            raise MeasurementError(f"link sender failed: {sender.stderr[-800:]}")
        assert receiver.stdout is not None and receiver.stderr is not None
        out = receiver.stdout.read()  # it ends with the stream (or its own --timeout)
        if receiver.wait(timeout=60) != 0:
            raise MeasurementError(f"link receiver failed: {receiver.stderr.read()[-800:]}")
        rate: float = json.loads(out.strip().splitlines()[-1])["mbit"]
        return rate
    except procs.ProcessNotReady as error:
        raise MeasurementError(str(error)) from None
    finally:
        procs.stop(receiver)


def format_table(link: dict[str, Any]) -> str:
    shaping = link["shaping"]
    rows = [f"{'direction':<16}{'shaped Mbit/s':>15}{'measured':>12}{'ratio':>8}"]
    for direction, measured in link["measured_mbit"].items():
        rows.append(f"{direction:<16}{shaping['rate_mbit'][direction]:>15g}{measured:>12.1f}"
                    f"{link['ratio'][direction]:>8.3f}")
    rows.append(f"lab: {link['lab']}, profile {link['profile']}, {shaping['method']}, "
                f"delay applied: {shaping['delay_applied']}")
    return "\n".join(rows)
