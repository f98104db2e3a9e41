"""The local two-site lab: real namespaces, tc, Ray nodes and moto_server; nothing left after."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import procs
from netem.lab import (
    LabDescription,
    LabUnavailable,
    lab_status,
    running_lab,
    stop_lab,
    two_site_lab,
)
from netem.lab import netns as netns_module
from netem.lab.state import LabState, recorded_lab_ids
from netem.profile import load_profile
from procs import MARKER_ENV
from tests.helpers.lab import assert_nothing_left, needs_netns
from tests.helpers.processes import ctrl_c_as_from_a_terminal

REPO = Path(__file__).resolve().parents[2]


def at_site(lab: LabDescription, site: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return lab.run(list(argv), site=site, capture_output=True, text=True, timeout=60)


CLOUD_TASK = """
import os, ray
ray.init(address="{address}", log_to_driver=False)
@ray.remote(num_cpus=1, label_selector={{"site": "cloud"}})
def where():
    return ray.util.get_node_ip_address(), sorted(os.sched_getaffinity(0))
print(*ray.get(where.remote()))
"""
AFFINITY = "import os; print(sorted(os.sched_getaffinity(0)))"


@pytest.mark.lab
@needs_netns
def test_the_lab_has_two_shaped_sites_ray_and_s3_and_leaves_nothing() -> None:
    with two_site_lab(load_profile(bw=50)) as lab:
        lab_id = lab.lab_id
        assert lab.kind == "netns"
        assert lab.shaping["rate_mbit"] == {
        "onprem->cloud": 55.0, "cloud->onprem": 55.0, "onprem->s3": 55.0, "s3->onprem": 55.0}
        assert lab.delay_applied is False and "NOT applied" in lab.notes[0]
        assert sorted((n["labels"]["role"], n["labels"]["site"], n["resources"].get(
            "transfer_slot")) for n in lab.nodes) == [
            ("cloud", "cloud", 1.0), ("hpc", "onprem", 1.0), ("login", "onprem", None)]
        for site, interface in (("onprem", "to-cloud"), ("cloud", "to-onprem")):
            qdiscs = at_site(lab, site, "tc", "qdisc", "show", "dev", interface).stdout
            assert "tbf 20: parent 1:1 rate 55Mbit" in qdiscs
            route = at_site(lab, site, "ip", "route", "get", "198.19.1.1").stdout
            assert "dev to-s3" in route  # S3 does not share the site link
        # the bucket sits at the cloud's end: on-prem's path to it is shaped, the cloud's not
        s3_side = ["ip", "netns", "exec", lab.namespaces["s3"], "tc", "qdisc", "show", "dev"]
        assert "rate 55Mbit" in at_site(lab, "onprem", "tc", "qdisc", "show", "dev",
                                        "to-s3").stdout
        assert "rate 55Mbit" in subprocess.run([*s3_side, "to-onprem"], capture_output=True,
                                               text=True, check=True).stdout
        assert "tbf" not in at_site(lab, "cloud", "tc", "qdisc", "show", "dev", "to-s3").stdout
        assert "tbf" not in subprocess.run([*s3_side, "to-cloud"], capture_output=True,
                                           text=True, check=True).stdout
        marker = Path(lab.storage["onprem"]) / "input.bin"
        marker.write_bytes(b"on-prem data")
        assert at_site(lab, "onprem", "cat", str(marker)).stdout == "on-prem data"
        assert at_site(lab, "cloud", "cat", str(marker)).returncode != 0
        for site in ("onprem", "cloud"):
            assert at_site(lab, site, sys.executable, "-c",
                           f"import urllib.request; urllib.request.urlopen("
                           f"'{lab.s3_endpoint_url}')").returncode == 0
        # each site on CPUs of its own (one each on 2 CPUs), and so every process it starts:
        # a Ray worker of the cloud node runs on the cloud's CPUs only
        sites = lab.cpus["sites"]
        if len(os.sched_getaffinity(0)) >= 2:
            assert not set(sites["onprem"]) & set(sites["cloud"])
        for site in ("onprem", "cloud"):
            assert at_site(lab, site, sys.executable, "-c", AFFINITY).stdout == (
                f"{sites[site]}\n")
        ran = at_site(lab, "onprem", sys.executable, "-c",
                      CLOUD_TASK.format(address=lab.ray_address))
        assert ran.stdout.strip().splitlines()[-1] == f"198.18.1.1 {sites['cloud']}", (
            ran.stderr[-600:])
        assert lab_status(lab_id)["processes_alive"]
    assert_nothing_left(lab_id)


@pytest.mark.lab
@needs_netns
def test_an_exception_inside_the_lab_removes_it() -> None:
    lab_id = ""
    with pytest.raises(RuntimeError, match="workload failed"):
        with two_site_lab(load_profile(bw=30), cloud_cpus=1) as lab:
            lab_id = lab.lab_id
            raise RuntimeError("workload failed")
    assert lab_id
    assert_nothing_left(lab_id)


@pytest.mark.lab
@pytest.mark.subprocess
@needs_netns
def test_ctrl_c_during_lab_up_leaves_nothing() -> None:
    lab_up = subprocess.Popen(
        [sys.executable, "-m", "invoke", "lab-up", "--bw", "50"], cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=ctrl_c_as_from_a_terminal,
    )
    lab_id = ""
    assert lab_up.stderr is not None
    for line in lab_up.stderr:
        if "creating namespaces sb-" in line:
            lab_id = line.split("sb-")[1].split("-")[0]
        if "starting Ray cloud node" in line:
            lab_up.send_signal(signal.SIGINT)
            break
    _, err = lab_up.communicate(timeout=120)
    assert lab_id, err
    assert lab_up.returncode != 0
    assert "did not come up: removing what it created" in err
    assert_nothing_left(lab_id)


@pytest.mark.lab
@pytest.mark.subprocess
@needs_netns
def test_lab_up_and_lab_down_are_separate_processes() -> None:
    up = procs.spawn([sys.executable, "-m", "invoke", "lab-up", "--bw", "100"], cwd=REPO)
    try:
        out, err = up.communicate(timeout=600)
    finally:  # on a timeout, SIGTERM: lab-up removes what it created
        procs.stop(up, grace_s=120)
    assert up.returncode == 0, err[-800:]
    lab = json.loads(out)
    assert lab["shaping"]["rate_mbit"] == {
        "onprem->cloud": 106.0, "cloud->onprem": 106.0, "onprem->s3": 106.0, "s3->onprem": 106.0}
    status = subprocess.run([sys.executable, "-m", "invoke", "lab-status"], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert json.loads(status.stdout)["namespaces_present"] == [
        f"sb-{lab['lab_id']}-{part}" for part in ("onprem", "cloud", "s3")]
    running = running_lab()
    assert running.lab_id == lab["lab_id"]
    assert running.run(["true"], site="cloud", timeout=30).returncode == 0
    down = subprocess.run([sys.executable, "-m", "invoke", "lab-down"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr[-800:]
    assert f"removed namespace sb-{lab['lab_id']}-cloud" in down.stdout
    assert_nothing_left(lab["lab_id"])


@pytest.mark.subprocess
def test_lab_down_without_a_lab_says_so() -> None:
    down = subprocess.run([sys.executable, "-m", "invoke", "lab-down"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert down.returncode == 2
    assert "no lab is up" in down.stderr


def test_without_namespaces_nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netns_module.os, "geteuid", lambda: 1000)
    with pytest.raises(LabUnavailable, match=r"needs root .* \(not root\); run as root"):
        with two_site_lab(load_profile("30m")):
            pass
    assert recorded_lab_ids() == []


@pytest.mark.subprocess
@pytest.mark.skipif(os.geteuid() != 0, reason="drops root to show the refusal")
def test_lab_tasks_without_root_print_one_line_and_exit_2() -> None:
    unprivileged = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    with tempfile.TemporaryDirectory() as home:
        os.chmod(home, 0o777)  # the user's home, for matplotlib's cache
        for task in (["lab-up", "--bw", "30"], ["measure-link", "--bw", "30"],
                     ["run-burst", "--bw", "30"]):
            done = subprocess.run([*unprivileged, sys.executable, "-m", "invoke", *task],
                                  cwd=REPO, capture_output=True, text=True, timeout=120,
                                  env={**os.environ, "HOME": home})
            assert done.returncode == 2, done.stderr[-800:]
            assert done.stderr.strip().splitlines() == [
                "error: the two-site lab needs root and iproute2 network namespaces (ip netns, "
                "tc) (not root); run as root, or run-burst --stack on a deployed stack"
            ]


@pytest.mark.subprocess
def test_lab_down_never_stops_a_recorded_pid_without_the_labs_marker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stale record (its lab died) names PIDs that may be anyone's by now: only what
    carries the lab's marker is stopped; the record goes either way."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the lab's dir would be
    sleep = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"]
    env = {key: value for key, value in os.environ.items() if key != MARKER_ENV}
    foreign = subprocess.Popen(sleep, env=env, stdout=subprocess.PIPE, text=True)
    ours = subprocess.Popen(sleep, env={**env, MARKER_ENV: "abc123"}, stdout=subprocess.PIPE,
                            text=True)
    try:
        for process in (foreign, ours):
            procs.wait_for_line(process, "up", timeout_s=30, name="sleep")
        LabState(lab_id="abc123", temp_dir=str(tmp_path / "sb-abc123"),
                 pids=[foreign.pid, ours.pid]).save()
        (tmp_path / "sb-abc123").mkdir()
        removed = stop_lab("abc123", progress=lambda message: None)
        assert procs.is_alive(foreign.pid)
        assert ours.wait(timeout=10) == -signal.SIGTERM
        assert removed == [f"pid {ours.pid}", f"directory {tmp_path / 'sb-abc123'}"]
        assert recorded_lab_ids() == []
    finally:
        procs.stop_children([foreign, ours], grace_s=5)
