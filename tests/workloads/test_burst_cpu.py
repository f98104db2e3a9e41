"""The CPU meter: a site's CPU seconds are its processes' (found by network namespace), kept
after a process exits, booked by what the process was doing; the scheduler's own CPU."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from workloads.burst.cpu import (
    CpuReading,
    SiteCpuMeter,
    own_cpu_seconds,
    parse_site_namespaces,
    site_meter,
)
from workloads.burst.options import BURST_SPEC

BURN = """
import sys, time
end = time.process_time() + float(sys.argv[1])
while time.process_time() < end:
    pass
print("burnt", flush=True)
sys.stdin.read()  # until the test closes it
"""


@pytest.mark.subprocess
def test_a_site_keeps_the_cpu_of_a_process_that_has_exited() -> None:
    meter = SiteCpuMeter({"here": "/proc/self/ns/net"})  # this process's namespace
    with meter.running():
        before = meter.read()
        child = subprocess.Popen([sys.executable, "-c", BURN, "1.0"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline() == "burnt\n"
        alive = meter.read().since(before)
        child.stdin.close()
        assert child.wait(timeout=30) == 0
        gone = meter.read().since(before)
    assert alive.sites_s["here"] >= 1.0
    assert gone.sites_s["here"] >= alive.sites_s["here"]  # not lost with the process
    assert gone.kinds_s["here"]["python -c"] >= 1.0  # booked to what it was


def test_a_namespace_of_no_process_counts_nothing_and_own_cpu_grows() -> None:
    start = own_cpu_seconds()
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    assert own_cpu_seconds() - start >= 0.2
    reading = CpuReading(1.0, {"a": 2.0}, {"a": {"raylet": 1.5}})
    assert reading.since(CpuReading(0.5, {"a": 0.5}, {"a": {"raylet": 1.0}})) == CpuReading(
        0.5, {"a": 1.5}, {"a": {"raylet": 0.5}})
    assert site_meter({}).read().sites_s == {} and site_meter({}).allowed_cpus() == {}


def test_site_namespaces_are_site_equals_name_pairs() -> None:
    assert parse_site_namespaces(("onprem=sb-1-onprem", "cloud=sb-1-cloud")) == {
        "onprem": "sb-1-onprem", "cloud": "sb-1-cloud"}
    assert parse_site_namespaces(None) == {}
    with pytest.raises(ValueError) as error:
        BURST_SPEC.parse(["--site-netns", "onprem"])
    assert str(error.value) == "--site-netns: expected SITE=NAMESPACE, got 'onprem'"


def test_others_are_the_busy_time_of_a_sites_cpus_its_processes_did_not_use() -> None:
    used = CpuReading(0.5, {"onprem": 30.0, "cloud": 20.0, "s3": 1.0}, {},
                      busy_s={0: 40.0, 1: 26.0}, steal_s={0: 2.0, 1: 0.5})
    split = {"onprem": [0], "cloud": [1]}
    # s3 floats over both CPUs: its time is among the others of the sites it ran on
    assert used.others_s(split) == {"onprem": 10.0, "cloud": 6.0}
    assert used.stolen_s(split) == {"onprem": 2.0, "cloud": 0.5}
    shared = {"onprem": [0, 1], "cloud": [0, 1]}  # one figure for sites on the same CPUs
    assert used.others_s(shared) == {"onprem": 16.0, "cloud": 16.0}
