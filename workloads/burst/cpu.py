"""CPU time, measured rather than assumed: this process's own (the driver, where the
schedulers run), and per site the CPU of every process in that site's network namespace
(the local lab's sites; elsewhere no namespace is given and none is measured).

A site's processes are sampled every SAMPLE_S seconds (and at every reading): each one's
user + system time as last seen is kept after it exits, since Ray's raylet ignores SIGCHLD
and so the time of an exited worker reaches no parent's account. What a process uses after
its last sample, and a process that lives between two samples, are missed. Each sample
also books the time a process used since the previous one under what it was doing then: a
Ray worker's process title names its task (`ray::run_task`, `ray::transfer`, ...)."""

from __future__ import annotations

import os
import re
import resource
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NETNS_DIR = Path("/run/netns")
PROC = Path("/proc")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SAMPLE_S = 0.5
# /proc/<pid>/stat fields after the command name: index 0 is field 3 (state)
UTIME, STIME, STARTTIME = 11, 12, 19


def own_cpu_seconds() -> float:
    """User + system CPU of this process, every thread of it."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def parse_site_namespaces(entries: tuple[str, ...] | None) -> dict[str, str]:
    """("onprem=sb-1-onprem", ...) -> {"onprem": "sb-1-onprem", ...}."""
    pairs: dict[str, str] = {}
    for entry in entries or ():
        site, _, namespace = entry.partition("=")
        if not site or not namespace:
            raise ValueError(f"expected SITE=NAMESPACE, got {entry!r}")
        pairs[site] = namespace
    return pairs


Counts = dict[Any, float]


def _minus(now: Counts, then: Counts) -> Counts:
    return {key: value - then.get(key, 0.0) for key, value in now.items()}


@dataclass(frozen=True)
class CpuReading:
    """One instant: this process's CPU seconds, each site's, each site's by kind of process
    (see `process_kind`), and per CPU of the machine its busy and its stolen seconds (time
    the hypervisor gave to another guest)."""

    own_s: float
    sites_s: dict[str, float] = field(default_factory=dict)
    kinds_s: dict[str, dict[str, float]] = field(default_factory=dict)
    busy_s: dict[int, float] = field(default_factory=dict)
    steal_s: dict[int, float] = field(default_factory=dict)

    def since(self, earlier: CpuReading) -> CpuReading:
        return CpuReading(
            self.own_s - earlier.own_s,
            _minus(self.sites_s, earlier.sites_s),
            {site: _minus(kinds, earlier.kinds_s.get(site, {}))
             for site, kinds in self.kinds_s.items()},
            _minus(self.busy_s, earlier.busy_s),
            _minus(self.steal_s, earlier.steal_s),
        )

    def others_s(self, site_cpus: Mapping[str, list[int]]) -> dict[str, float]:
        """Per site: the busy seconds of its CPUs that none of the sites' processes used (other
        processes of the machine, and any that float over every CPU). Sites on the same CPUs
        share one figure, under each of their names."""
        groups: dict[tuple[int, ...], list[str]] = {}
        for site, cpus in site_cpus.items():
            if site in self.sites_s and cpus:
                groups.setdefault(tuple(cpus), []).append(site)
        others = {}
        for group, sites in groups.items():
            busy = sum(self.busy_s.get(cpu, 0.0) for cpu in group)
            for site in sites:
                others[site] = max(0.0, busy - sum(self.sites_s[s] for s in sites))
        return others

    def stolen_s(self, site_cpus: Mapping[str, list[int]]) -> dict[str, float]:
        """Per site: the seconds the hypervisor took its CPUs away."""
        return {site: sum(self.steal_s.get(cpu, 0.0) for cpu in cpus)
                for site, cpus in site_cpus.items() if site in self.sites_s and cpus}


def machine_cpu_seconds() -> tuple[dict[int, float], dict[int, float]]:
    """Per CPU: busy seconds (user, nice, system, irq, softirq) and stolen seconds so far."""
    busy, steal = {}, {}
    for line in (PROC / "stat").read_text().splitlines():
        name, *values = line.split()
        if not name.startswith("cpu") or name == "cpu":
            continue
        ticks = [int(v) for v in values]
        cpu = int(name[3:])
        busy[cpu] = (ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]) / CLOCK_TICKS
        steal[cpu] = (ticks[7] if len(ticks) > 7 else 0) / CLOCK_TICKS
    return busy, steal


def process_kind(pid: int, command: str) -> str:
    """What a process is doing, from its command line: a Ray worker's title names its task
    (`ray::transfer-dir-001` -> `ray::transfer`, `ray::IDLE`), Ray's daemons their program
    (raylet, gcs_server, `python dashboard.py`), the driver its module."""
    try:
        argv = [a for a in (PROC / str(pid) / "cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return command
    if len(argv) == 1 and b" " in argv[0]:  # a title set to a whole command line
        argv = argv[0].split()
    first = argv[0].decode(errors="replace") if argv else ""
    if first.startswith("ray::"):  # ray::compute-dir-001, ray::AsyncParameterServer.stats
        return re.split(r"[-.\s]", first, maxsplit=1)[0]
    if Path(first).name.startswith("python"):
        flags = [a.decode(errors="replace") for a in argv[1:] if a]
        if "-m" in flags[:-1]:
            return f"python -m {flags[flags.index('-m') + 1]}"
        script = next((a for a in flags if a.endswith(".py")), None)
        if script is not None:
            return f"python {Path(script).name}"
        return "python -c" if "-c" in flags else "python"
    return Path(first).name or command


class SiteCpuMeter:
    """The CPU seconds used so far by each site's processes (see the module doc); sampled
    in a thread of its own while running (`running()`)."""

    def __init__(self, namespaces: Mapping[str, str]) -> None:
        self.inodes = {_namespace_inode(name): site for site, name in namespaces.items()}
        self.sites = list(namespaces)
        self._lock = threading.Lock()
        self._site_of: dict[tuple[int, str], str] = {}  # (pid, start time) -> site
        self._elsewhere: set[int] = set()  # live pids of processes in no site
        self._ticks: dict[tuple[int, str], int] = {}  # last seen user + system ticks
        self._kinds: dict[str, dict[str, int]] = {site: {} for site in self.sites}

    @contextmanager
    def running(self) -> Iterator[SiteCpuMeter]:
        stop = threading.Event()

        def sample_until_stopped() -> None:
            while not stop.wait(SAMPLE_S):
                self.sample()

        thread = threading.Thread(target=sample_until_stopped, name="site-cpu", daemon=True)
        self.sample()
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()

    def sample(self) -> None:
        with self._lock:
            present = set()
            for pid in _pids():
                present.add(pid)
                if pid in self._elsewhere:
                    continue  # not a site's: its stat is not read again while it lives
                fields = _stat(pid)
                if fields is None:
                    continue
                key = (pid, fields[STARTTIME])
                if key not in self._site_of:
                    site = self._site(pid)
                    if site is None:
                        self._elsewhere.add(pid)
                        continue
                    self._site_of[key] = site
                site = self._site_of[key]
                ticks = int(fields[UTIME]) + int(fields[STIME])
                used = ticks - self._ticks.get(key, 0)
                self._ticks[key] = ticks
                if used:
                    kind = process_kind(pid, fields[-1])
                    kinds = self._kinds[site]
                    kinds[kind] = kinds.get(kind, 0) + used
            # a pid gone from the machine may come back as another process; a site's
            # processes stay, with their last times
            self._elsewhere &= present

    def read(self) -> CpuReading:
        self.sample()
        with self._lock:
            sites = dict.fromkeys(self.sites, 0.0)
            for key, ticks in self._ticks.items():
                sites[self._site_of[key]] += ticks / CLOCK_TICKS
            kinds = {site: {kind: ticks / CLOCK_TICKS for kind, ticks in by_kind.items()}
                     for site, by_kind in self._kinds.items()}
        return CpuReading(own_cpu_seconds(), sites, kinds, *machine_cpu_seconds())

    def allowed_cpus(self) -> dict[str, list[int]]:
        """Per site, the CPUs its processes may run on (the union of their affinities)."""
        self.sample()
        allowed: dict[str, set[int]] = {site: set() for site in self.sites}
        with self._lock:
            live = [(pid, site) for (pid, _), site in self._site_of.items()]
        for pid, site in live:
            try:
                allowed[site] |= os.sched_getaffinity(pid)
            except OSError:
                continue  # it has exited since
        return {site: sorted(cpus) for site, cpus in allowed.items()}

    def _site(self, pid: int) -> str | None:
        try:
            link = os.readlink(PROC / str(pid) / "ns" / "net")
        except OSError:
            return None
        return self.inodes.get(int(link.partition("[")[2].rstrip("]") or 0))


def _namespace_inode(name: str) -> int:
    """A namespace named under /run/netns (as `ip netns` names them), or a namespace file's
    path (/proc/<pid>/ns/net)."""
    return os.stat(name if name.startswith("/") else NETNS_DIR / name).st_ino


def _pids() -> Iterator[int]:
    for entry in os.scandir(PROC):
        if entry.name.isdigit():
            yield int(entry.name)


def _stat(pid: int) -> list[str] | None:
    """The process's stat fields from field 3 on, then its command name; None if gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    head, _, rest = text.rpartition(")")
    return [*rest.split(), head.partition("(")[2]]


class NoSiteMeter:
    """Where no site namespace is known: this process's CPU only."""

    sites: list[str] = []

    @contextmanager
    def running(self) -> Iterator[NoSiteMeter]:
        yield self

    def read(self) -> CpuReading:
        return CpuReading(own_cpu_seconds())

    def allowed_cpus(self) -> dict[str, list[int]]:
        return {}


CpuMeter = SiteCpuMeter | NoSiteMeter


def site_meter(namespaces: Mapping[str, str]) -> CpuMeter:
    return SiteCpuMeter(namespaces) if namespaces else NoSiteMeter()
