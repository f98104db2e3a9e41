"""measure-link: bring a lab up, stream across its site link both ways and along the on-prem
site's shaped path to S3 both ways, tear it down."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import procs
from netem.lab import LabDescription, two_site_lab
from netem.lab.addressing import S3_LINK, S3_NAMESPACE_ROLE, S3_SERVICE_IP
from netem.lab.lab import Progress, print_progress
from netem.lab.netns import in_ns
from netem.linkprobe import READY
from netem.profile import Profile
from vocab.burst import SITE_CLOUD, SITE_ONPREM
from vocab.errors import RunFailed

PROBE_PORT = 5201
DIRECTIONS = ((SITE_ONPREM, SITE_CLOUD), (SITE_CLOUD, SITE_ONPREM),
              (SITE_ONPREM, S3_NAMESPACE_ROLE), (S3_NAMESPACE_ROLE, SITE_ONPREM))


class MeasurementError(RunFailed, RuntimeError):
    """A stream across the lab link did not complete."""


def measure_link(profile: Profile, out_dir: Path, *, seconds: float = 4.0,
                 progress: Progress = print_progress) -> dict[str, Any]:
    """Measure both directions of a fresh lab's link and of the on-prem path to S3; writes
    and returns link.json's content.

    Rates are compared with what tc was given (the lab's shaping), not with the profile."""
    with two_site_lab(profile, progress=progress) as lab:
        shaped = lab.rate_mbit
        measured = {}
        for source, target in DIRECTIONS:
            direction = f"{source}->{target}"
            progress(f"measuring {direction} for {seconds:g} s "
                     f"(shaped to {shaped[direction]:g} Mbit/s)")
            measured[direction] = round(
                stream_mbit(at_part(lab, source), at_part(lab, target),
                            address_of(lab, source, target), seconds), 2)
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


def at_part(lab: LabDescription, part: str) -> list[str]:
    """The argv prefix that runs a command at a site, or in the S3 service's namespace."""
    if part == S3_NAMESPACE_ROLE:
        return in_ns(lab.namespaces[part], [])
    return lab.command([], site=part)


def address_of(lab: LabDescription, source: str, target: str) -> str:
    """Where a stream from `source` to `target` is sent: the S3 service's address, the
    on-prem end of its S3 path (from the S3 service), else the target site's first node."""
    if target == S3_NAMESPACE_ROLE:
        return S3_SERVICE_IP
    if source == S3_NAMESPACE_ROLE:
        return S3_LINK[target][1]
    return lab.node_ip(target)


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
