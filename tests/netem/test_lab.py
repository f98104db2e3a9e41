"""The local two-site lab: real namespaces, tc, Ray nodes and moto_server; nothing left after."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from netem.lab import LabDescription, lab_status, running_lab, two_site_lab
from netem.lab.netns import existing_namespaces, netns_supported
from netem.lab.processes import marked_pids
from netem.lab.state import recorded_lab_ids, state_dir
from netem.profile import load_profile

REPO = Path(__file__).resolve().parents[2]
needs_netns = pytest.mark.skipif(not netns_supported()[0],
                                 reason=f"netns lab unavailable: {netns_supported()[1]}")


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPOTBURST_LAB_STATE_DIR", str(tmp_path / "labs"))


def assert_nothing_left(lab_id: str) -> None:
    assert not [ns for ns in existing_namespaces() if ns.startswith(f"sb-{lab_id}-")]
    assert marked_pids(lab_id) == set()
    assert not (Path(tempfile.gettempdir()) / f"sb-{lab_id}").exists()
    assert not (state_dir() / f"{lab_id}.json").exists()


def at_site(lab: LabDescription, site: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return lab.run(list(argv), site=site, capture_output=True, text=True, timeout=60)


CLOUD_TASK = """
import ray
ray.init(address="{address}", log_to_driver=False)
@ray.remote(num_cpus=1, label_selector={{"site": "cloud"}})
def where():
    return ray.util.get_node_ip_address()
print(ray.get(where.remote()))
"""


@needs_netns
def test_the_lab_has_two_shaped_sites_ray_and_s3_and_leaves_nothing() -> None:
    with two_site_lab(load_profile(bw=50)) as lab:
        lab_id = lab.lab_id
        assert lab.kind == "netns"
        assert lab.delay_applied is False and "NOT applied" in lab.notes[0]
        assert sorted((n["labels"]["role"], n["labels"]["site"], n["resources"].get(
            "transfer_slot")) for n in lab.nodes) == [
            ("cloud", "cloud", 1.0), ("hpc", "onprem", 1.0), ("login", "onprem", None)]
        for site, interface in (("onprem", "to-cloud"), ("cloud", "to-onprem")):
            qdiscs = at_site(lab, site, "tc", "qdisc", "show", "dev", interface).stdout
            assert "tbf 20: parent 1:1 rate 55Mbit" in qdiscs
            route = at_site(lab, site, "ip", "route", "get", "198.19.1.1").stdout
            assert "dev to-s3" in route  # S3 does not cross the shaped link
        marker = Path(lab.storage["onprem"]) / "input.bin"
        marker.write_bytes(b"on-prem data")
        assert at_site(lab, "onprem", "cat", str(marker)).stdout == "on-prem data"
        assert at_site(lab, "cloud", "cat", str(marker)).returncode != 0
        for site in ("onprem", "cloud"):
            assert at_site(lab, site, sys.executable, "-c",
                           f"import urllib.request; urllib.request.urlopen("
                           f"'{lab.s3_endpoint_url}')").returncode == 0
        ran = at_site(lab, "onprem", sys.executable, "-c",
                      CLOUD_TASK.format(address=lab.ray_address))
        assert ran.stdout.strip().splitlines()[-1] == "198.18.1.1", ran.stderr[-600:]
        assert lab_status(lab_id)["processes_alive"]
    assert_nothing_left(lab_id)


@needs_netns
def test_an_exception_inside_the_lab_removes_it() -> None:
    lab_id = ""
    with pytest.raises(RuntimeError, match="workload failed"):
        with two_site_lab(load_profile(bw=30), cloud_cpus=1) as lab:
            lab_id = lab.lab_id
            raise RuntimeError("workload failed")
    assert lab_id
    assert_nothing_left(lab_id)


@needs_netns
def test_ctrl_c_during_lab_up_leaves_nothing() -> None:
    lab_up = subprocess.Popen(
        [sys.executable, "-m", "invoke", "lab-up", "--bw", "50"], cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
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


@needs_netns
def test_lab_up_and_lab_down_are_separate_processes() -> None:
    up = subprocess.run([sys.executable, "-m", "invoke", "lab-up", "--bw", "100"], cwd=REPO,
                        capture_output=True, text=True, timeout=180)
    assert up.returncode == 0, up.stderr[-800:]
    lab = json.loads(up.stdout)
    assert lab["target_mbit"] == {"onprem->cloud": 106.0, "cloud->onprem": 106.0}
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


def test_lab_down_without_a_lab_says_so() -> None:
    down = subprocess.run([sys.executable, "-m", "invoke", "lab-down"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert down.returncode == 2
    assert "no lab is up" in down.stderr


def test_a_bad_kind_is_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="kind 'vm'"):
        with two_site_lab(load_profile("30m"), kind="vm"):
            pass
    assert recorded_lab_ids() == []
