"""The inference service on a real spot lab (one per module): fair share between two jobs of
very different cost per query, two workers and the coordinator killed with every query
answered exactly once, commands refused with one line naming what was wrong, and the
coordinator killed after every kind of command (and after each refused one, and with a bad
job record planted in the store) coming back each time and finishing the job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray

from launch.inference import (
    LAB_COMMAND_HOST,
    STATE_DIR_ENV,
    ServiceRecord,
    command,
    connected,
)
from spotlab import SpotLab, SpotLabConfig, spot_lab
from spotlab.state import STATE_DIR_ENV as LAB_STATE_DIR_ENV
from tests.helpers.waiting import wait_until
from workloads.common.storage import Storage, open_storage
from workloads.inference import service
from workloads.inference.coordinator import COORDINATOR_NAME, NAMESPACE, Job
from workloads.inference.endpoint import read_endpoint, send_command, signed_headers
from workloads.inference.models import (
    Bundle,
    OnnxModel,
    array_from_bytes,
    array_to_bytes,
    make_bundle,
    sha256,
    tiled,
)
from workloads.inference.service import ServiceError, call

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]
LAB = SpotLabConfig(spot=2, on_demand=1, cpus_per_node=2, alpha=1.0, warning_s=4.0,
                    replace_delay_s=1.0, object_store_mb=80, dashboard=False)
"""Two spot nodes of two workers each, an on-demand node for the coordinator; no chain
preemptions (α = 1)."""
COMMAND_TOKEN = "test-command-token"




@pytest.fixture(scope="module")
def bundle() -> Bundle:
    return make_bundle(repeat=1)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpotLab]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(LAB_STATE_DIR_ENV, str(tmp_path_factory.mktemp("spotlab-state")))
        with spot_lab(LAB) as running, connected(running.ray_address, running.driver_env):
            yield running


def fill_store(path: Path, bundle: Bundle, repeat: int) -> Storage:
    """The bundle's files, test sets and labels tiled `repeat` times."""
    store = open_storage(str(path))
    for name, data in bundle.files.items():
        if name.endswith(("_testset", "_label")):
            data = array_to_bytes(tiled(array_from_bytes(data, name), repeat))
        store.write_bytes(f"files/{name}", data)
    return store


@pytest.fixture
def running_service(lab: SpotLab, tmp_path: Path) -> Iterator[Callable[..., Storage]]:
    """Start a coordinator with the given settings on a store in tmp_path; stopped after."""
    started: list[bool] = []

    def start(bundle: Bundle, repeat: int, **settings: Any) -> Storage:
        store = fill_store(tmp_path / "store", bundle, repeat)
        service.start_coordinator({"store": str(tmp_path / "store"), "workers": 4,
                                   "command_token": COMMAND_TOKEN,
                                   "command_host": LAB_COMMAND_HOST, **settings})
        started.append(True)
        return store

    yield start
    if started:
        service.stop_coordinator()


def add_and_start(batch_size: int = 20) -> None:
    for size in ("small", "large"):
        call("job_add", size, f"{size}_model", f"{size}_testset", f"{size}_label", batch_size)
        call("job_start", size)


def test_fair_share_keeps_rates_of_a_cheap_and_a_costly_job_together(
        running_service: Callable[..., Storage], bundle: Bundle) -> None:
    # enough queries that neither job ends while it is measured on a quiet machine
    running_service(bundle, repeat=1000, rebalance_s=1.0, window_s=8.0)
    add_and_start(batch_size=50)
    wait_until(lambda: (status := _status_or_none()) and all(
        job["processed"] > 0 for job in status["jobs"].values()), 120.0, "both jobs answering")
    time.sleep(12.0)  # a full window and rebalances after that: the "after 30 s"
    spreads = []
    for _ in range(3):
        jobs = call("job_status")["jobs"]
        small, large = jobs["small"], jobs["large"]
        assert small["state"] == large["state"] == "running", "a job ended before measuring"
        spreads.append(max(small["query_rate"], large["query_rate"])
                       / min(small["query_rate"], large["query_rate"]))
        time.sleep(2.0)
    # the large network costs ≥ 3× more per query, so it holds the larger share of the
    # workers, and yet their rates stay within the seed's 20 % (the 5 % target is
    # measured by benchmarks/inference_fairness.py over a longer run, not here):
    assert large["latency"]["mean_ms"] >= 3 * small["latency"]["mean_ms"]
    assert large["cost_per_query_s"] > small["cost_per_query_s"]
    assert large["share"] > small["share"]
    assert max(spreads) <= 1.20, f"rate spreads {spreads}"
    # a stopped job returns to idle and starts again
    assert call("job_stop", "small")["state"] == "idle"
    assert call("job_status", "small")["jobs"]["small"]["state"] == "idle"
    assert call("job_start", "small")["remaining_sub_jobs"] > 0
    assert call("job_status", "small")["jobs"]["small"]["state"] == "running"


def save_record(lab: SpotLab, store: Storage, state: Path) -> None:
    """The record infer-up writes, for the service a test started: the CLI's way in."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_DIR_ENV, str(state))
        ServiceRecord(lab.ray_address, lab.driver_env, store.uri, None, None, time.time(),
                      COMMAND_TOKEN, (read_endpoint(store) or {}).get("url")).save()


def busy_workers() -> list[dict[str, Any]]:
    return [w for w in call("members")["workers"] if w["state"] == "busy" and w["pid"]]


def victims_holding(names: set[str]) -> dict[str, tuple[str | None, int | None]]:
    return {w["name"]: (w["job"], w["sub_job"]) for w in call("members")["workers"]
            if w["name"] in names}


def test_two_workers_and_the_coordinator_killed_lose_no_query_and_answer_none_twice(
        running_service: Callable[..., Storage], bundle: Bundle, lab: SpotLab,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = running_service(bundle, repeat=3, rebalance_s=1.0, window_s=8.0)
    save_record(lab, store, tmp_path / "state")
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    add_and_start(batch_size=10)
    wait_until(lambda: (status := _status_or_none()) and all(
        job["progress"] > 0.2 for job in status["jobs"].values()), 120.0, "both jobs 20 % done")
    victims = wait_until(lambda: busy_workers()[:2] if len(busy_workers()) >= 2 else None,
                       20.0, "two busy workers")
    for victim in victims:  # frozen: neither can finish the sub-job it is on
        os.kill(victim["pid"], signal.SIGSTOP)
    frozen_at = time.time()
    # what each frozen victim holds, once an answer it sent before the freeze has arrived
    names = {victim["name"] for victim in victims}
    holding = wait_until(lambda: (now := victims_holding(names)) == victims_holding(names)
                         and now, 10.0, "the frozen victims' sub-jobs settled")
    held = [(name, job, sub_job) for name, (job, sub_job) in holding.items()
            if sub_job is not None]
    coordinator = ray.get_actor(COORDINATOR_NAME, namespace=NAMESPACE)
    answer: Any = ray.get(coordinator.__ray_call__.remote(lambda _: os.getpid()))
    coordinator_pid = int(answer)
    os.kill(coordinator_pid, signal.SIGSTOP)
    # the worker record as a coordinator killed in the middle of writing it leaves it
    store.write_bytes("service/workers.json", b"")
    for victim in victims:  # the same moment, each in the middle of a sub-job
        os.kill(victim["pid"], signal.SIGKILL)
    os.kill(coordinator_pid, signal.SIGKILL)  # Ray restarts it

    # job-status keeps answering: the restarted coordinator resumed from the store (the kill
    # is asynchronous: the first answers may still come from the first incarnation)
    status = wait_until(lambda: (status := _status_or_none()) and status[
        "coordinator_incarnation"] >= 2 and status, 60.0, "job-status after the restart")
    assert status["coordinator_incarnation"] == 2
    assert status["jobs"]["small"]["processed"] > 0
    # and so does the CLI's way in: HTTP to wherever the new incarnation published itself
    assert command("job_status")["coordinator_incarnation"] == 2
    final = wait_until(lambda: (status := _status_or_none()) and all(
        job["state"] == "done" for job in status["jobs"].values()) and status["jobs"],
        120.0, "both jobs done")
    for size in ("small", "large"):
        job = final[size]
        assert job["processed"] == job["queries"]
        merged = _read_output(store, job["run_id"])
        assert merged["ids"] == list(range(job["queries"]))
        model = OnnxModel(store.read_bytes(f"files/{size}_model"))
        queries = array_from_bytes(store.read_bytes(f"files/{size}_testset"), "t")
        assert merged["answered"] == job["queries"] == len(queries)
        assert merged["predictions"] == model.predict(queries).tolist()
        assert job["accuracy"] > 0.9
    # every sub-job a victim held ran again (its part was written after the victim froze)
    # and is counted as re-run, though the coordinator that saw the victims die is not the
    # one that queued them again; only dead workers' sub-jobs are counted
    reran = [(name, job, sub_job) for name, job, sub_job in held
             if json.loads(store.read_bytes(f"jobs/{final[job]['run_id']}/parts/"
                                            f"{sub_job:06d}.json"))["finished_at"] > frozen_at]
    assert reran, f"no victim was caught in the middle of a sub-job: {victims} {held}"
    assert final["small"]["reruns"] + final["large"]["reruns"] >= len(reran)
    for size in ("small", "large"):
        counted = [name for name in store.names()
                   if name.startswith(f"jobs/{final[size]['run_id']}/reruns/")]
        assert len(counted) == final[size]["reruns"]
        for name, job, sub_job in reran:
            if job == size:
                assert f"jobs/{final[size]['run_id']}/reruns/{sub_job:06d}.{name}" in counted
        assert not {name.rpartition(".")[2] for name in counted} & {
            w["name"] for w in call("members")["workers"]}
    live = wait_until(lambda: (lambda up: up if len(up) == 4 else None)(
        [w for w in call("members")["workers"] if w["state"] in ("idle", "busy")]),
        60.0, "two replacement workers")
    assert not {w["pid"] for w in live} & {v["pid"] for v in victims}
    # the survivors were found again, not left running beside workers made in their name
    running = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
               if a["namespace"] == NAMESPACE and a["name"] != COORDINATOR_NAME}
    assert running == {w["name"] for w in live}


def test_a_worker_gets_its_next_sub_job_while_one_runs_and_a_killed_one_gives_each_back_once(
        running_service: Callable[..., Storage], bundle: Bundle) -> None:
    store = running_service(bundle, repeat=3, workers=1)
    [worker] = wait_until(lambda: [w for w in call("members")["workers"]
                                   if w["state"] == "idle" and w["pid"]], 60.0, "the worker up")
    handle = ray.get_actor(worker["name"], namespace=NAMESPACE)
    # asked before the job starts, so it stops one of its first sub-jobs, with more to give
    # out (asked once the worker was busy, it could stop the last, with nothing to queue)
    hold: Any = handle.hold_mid_sub_job.remote(60.0)
    call("job_add", "small", "small_model", "small_testset", "small_label", 10)
    run_id = call("job_start", "small")["run_id"]
    holding: Any = ray.get(hold)
    assert holding is not None and holding["run_id"] == run_id, holding
    running = {"job": "small", "sub_job": holding["sub_job"]}

    def held() -> list[dict[str, Any]] | None:
        [seen] = [w for w in call("members")["workers"] if w["name"] == worker["name"]]
        return seen["held"] if seen["held"][:1] == [running] and len(seen["held"]) == 2 \
            else None

    # stopped inside a sub-job, the worker already holds the next one, queued behind it
    queued = wait_until(held, 30.0, "the next sub-job handed out while one runs")[1]
    assert queued["sub_job"] != running["sub_job"]
    parts = f"jobs/{run_id}/parts"
    assert f"{parts}/{queued['sub_job']:06d}.json" not in store.names()
    ray.kill(handle, no_restart=True)
    final = wait_until(lambda: (status := _status_of("small")) and status["state"] == "done"
                       and status, 120.0, "the job done on a replacement worker")
    # each sub-job the killed worker held ran again elsewhere, counted as re-run once
    reruns = sorted(name.rpartition("/")[2] for name in store.names()
                    if name.startswith(f"jobs/{run_id}/reruns/"))
    assert reruns == sorted(f"{held['sub_job']:06d}.{worker['name']}"
                            for held in (running, queued))
    assert final["reruns"] == 2
    # only the sub-job the worker had started is charged its death, not the one queued
    deaths = [name.rpartition("/")[2] for name in store.names()
              if name.startswith(f"jobs/{run_id}/deaths/")]
    assert deaths == [f"{running['sub_job']:06d}.{worker['name']}.worker"]
    assert final["deaths"] == 1
    for held_sub_job in (running, queued):
        part = json.loads(store.read_bytes(f"{parts}/{held_sub_job['sub_job']:06d}.json"))
        assert part["worker"] != worker["name"]
    merged = _read_output(store, run_id)
    assert merged["ids"] == list(range(final["queries"])) and merged["answered"] == len(
        merged["ids"])


def _status_or_none() -> dict[str, Any] | None:
    try:
        return call("job_status", timeout_s=2.0)
    except ServiceError:
        return None


def _read_output(store: Storage, run_id: str) -> dict[str, Any]:
    return dict(json.loads(store.read_bytes(f"jobs/{run_id}/output.json")))


def test_commands_refuse_bad_input_naming_what_was_wrong(
        running_service: Callable[..., Storage], bundle: Bundle) -> None:
    store = running_service(bundle, repeat=1)
    store.write_bytes("files/long_testset", array_to_bytes(np.zeros((100_001, 64), np.uint8)))
    store.write_bytes("files/long_label", array_to_bytes(np.zeros(100_001, np.uint8)))
    refusals: dict[tuple[Any, ...], str] = {
        ("job_add", "j", "small_model", "long_testset", "long_label", 1):
            "--batch-size: 100001 queries in batches of 1 make 100001 sub-jobs, more than "
            "100000",
        ("job_start", "nope"): "unknown job 'nope'",
        ("job_add", "j", "missing_model", "small_testset", "small_label", 5):
            "--model: no file 'missing_model' in the store",
        ("job_add", "j", "small_model", "small_testset", "small_label", 0): "--batch-size",
        ("job_add", "j", "small_label", "small_testset", "small_label", 5):
            "small_label: not an ONNX model",
        ("job_add", "j", "large_model", "small_testset", "small_label", 5):
            "--testset: 'small_testset' holds uint8 of shape (450, 64); model 'large_model' "
            "takes float32 of shape (N, 1, 8, 8)",
        ("job_add", "j", "small_model", "small_testset", "small_testset", 5):
            "--labels: 'small_testset' has shape (450, 64); the test set has 450 queries",
    }
    for args, expected in refusals.items():
        with pytest.raises(ServiceError) as refused:
            call(*args)
        assert expected in str(refused.value) and "\n" not in str(refused.value)
    call("job_add", "j", "small_model", "small_testset", "small_label", 5)
    with pytest.raises(ServiceError, match="job 'j' already exists"):
        call("job_add", "j", "small_model", "small_testset", "small_label", 5)
    with pytest.raises(ServiceError, match="job 'j' is not running"):
        call("job_stop", "j")
    call("job_start", "j")
    for method, expected in (("job_start", "already running"), ("job_remove", "job-stop it")):
        with pytest.raises(ServiceError, match=expected):
            call(method, "j")
    # job-start checks the files again: one changed behind the service's back is refused
    store.write_bytes("files/other_label", store.read_bytes("files/small_label"))
    call("job_add", "k", "small_model", "small_testset", "other_label", 5)
    store.write_bytes("files/other_label", array_to_bytes(np.zeros(450, np.int64)))
    with pytest.raises(ServiceError, match="job 'k': its labels 'other_label' changed in "
                                           "the store since job-add"):
        call("job_start", "k")
    assert call("job_status", "k")["jobs"]["k"]["state"] == "idle"


@pytest.mark.subprocess
def test_cli_commands_answer_in_one_line(lab: SpotLab, tmp_path: Path,
                                         running_service: Callable[..., Storage],
                                         bundle: Bundle) -> None:
    store = running_service(bundle, repeat=1)
    state = tmp_path / "inference-state"
    env = {**os.environ, STATE_DIR_ENV: str(state)}
    save_record(lab, store, state)
    with pytest.MonkeyPatch.context() as patch:  # the lab's endpoint is on loopback only
        patch.setenv(STATE_DIR_ENV, str(state))
        assert str(ServiceRecord.load().command_url).startswith(f"http://{LAB_COMMAND_HOST}:")

    def invoke(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=60)

    listing = invoke("files-ls")
    assert listing.returncode == 0 and "small_model" in listing.stdout.split()
    members = invoke("members")  # the coordinator asks Ray for the nodes: from its HTTP thread
    assert members.returncode == 0 and members.stdout.count(" alive cpus=") == 4, members
    for args, expected in ((("job-start", "ghost"), "error: unknown job 'ghost'"),
                           (("files-get", "ghost", str(tmp_path / "g")),
                            "error: NAME 'ghost': no such file"),
                           (("job-add", "j", "--model", "small_model"),
                            "error: --testset: required")):
        refused = invoke(*args)
        assert refused.returncode == 2
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert refused.stderr.startswith(expected), refused.stderr
    added = invoke("job-add", "j", "--model", "small_model", "--testset", "small_testset",
                   "--labels", "small_label", "--batch-size", "30")
    assert added.returncode == 0, added.stderr
    assert "15 sub-jobs" in added.stdout
    status = invoke("job-status", "--name", "j")
    assert "j: idle, 0/450 queries" in status.stdout
    # the command path starts no Ray driver: the CLI process never imports ray
    probe = subprocess.run([sys.executable, "-c", NO_RAY_PROBE, "job-status", "--name", "j"],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert "j: idle, 0/450 queries" in probe.stdout, probe.stderr
    assert probe.stdout.splitlines()[-1] == "ray imported: False"


NO_RAY_PROBE = """
import sys
from invoke.main import program
try:
    program.run(["invoke", *sys.argv[1:]])
finally:
    print(f"ray imported: {'ray' in sys.modules}", flush=True)
"""


@pytest.mark.subprocess
def test_the_service_job_brings_the_service_up_and_down(lab: SpotLab, tmp_path: Path) -> None:
    """What infer-up --stack runs as a Ray Job on the stack's cluster, run here as a driver
    of the lab: the coordinator outlives it and answers over HTTP with the given token."""
    import json

    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"store": "", "workers": 1,
                                    "command_token": COMMAND_TOKEN}))
    env = {**os.environ, **lab.driver_env}

    def job(*args: str) -> dict[str, Any]:
        out = tmp_path / args[-1]
        done = subprocess.run([sys.executable, "-m", "workloads.inference.up", *args[:-1],
                               "--out", str(out)], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-800:]
        return dict(json.loads((out / "summary.json").read_text()))

    up = job("--settings", str(settings), "up")
    try:
        assert up["store"] == str(tmp_path / "up" / "store")  # beside the job's results
        url = up["endpoint"]["url"]  # no command_host given: the node's IP, as on a stack
        node_ips = {node["NodeManagerAddress"] for node in ray.nodes()}
        assert url.removeprefix("http://").rpartition(":")[0] in node_ips
        members = wait_until(lambda: (answer := send_command(
            url, COMMAND_TOKEN, "members", [], 5.0)) and answer["workers"] and answer, 60.0,
            "the coordinator's worker")
        assert [w["name"] for w in members["workers"]] == ["inference-worker-0"]
        for written in (tmp_path / "up").glob("*.json"):  # summary, provenance
            assert COMMAND_TOKEN not in written.read_text(), written
    finally:
        down = job("--action", "down", "down")
    assert down["workers_stopped"] == 1
    endpoint = read_endpoint(open_storage(up["store"]))
    assert endpoint is not None and endpoint["url"] is None


def _kill_coordinator_and_wait(after: str) -> int:
    """Kill the coordinator (Ray restarts it) and wait until its next incarnation answers."""
    before = call("job_status", timeout_s=10.0)["coordinator_incarnation"]
    ray.kill(ray.get_actor(COORDINATOR_NAME, namespace=NAMESPACE), no_restart=False)
    status = wait_until(lambda: (status := _status_or_none()) and status[
        "coordinator_incarnation"] > before and status, 60.0,
        f"the coordinator back after {after}")
    return int(status["coordinator_incarnation"])


def _post(store: Storage, body: bytes) -> tuple[int, dict[str, Any]]:
    """A command as raw JSON to the coordinator's endpoint, with the service's token."""
    import http.client
    import json
    from urllib.parse import urlsplit

    where = urlsplit(str((read_endpoint(store) or {})["url"]))
    connection = http.client.HTTPConnection(str(where.hostname), where.port, timeout=10)
    try:
        connection.request("POST", "/command", body=body,
                           headers={**signed_headers(COMMAND_TOKEN, "POST", "/command", body),
                                    "Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, dict(json.loads(response.read()))
    finally:
        connection.close()


REFUSED_OVER_HTTP = [
    b'["b", "small_model", "small_testset", "small_label", NaN]',
    b'["b", "small_model", "small_testset", "small_label", 1.5]',
    b'["b", "small_model", "small_testset", "small_label", Infinity]',
    b'["b", "small_model", "small_testset", "small_label", 1e400]',
    b'["b", "small_model", "small_testset", "small_label", true]',
    b'["b", "small_model", "small_testset", "small_label", 100000000000000000000000000000]',
    b'["' + b"x" * 20_000 + b'", "small_model", "small_testset", "small_label", 5]',
]


def test_the_coordinator_comes_back_after_every_command_and_every_refusal(
        running_service: Callable[..., Storage], bundle: Bundle) -> None:
    import json

    # 18,000 queries in sub-jobs of 5: seconds of work, so the job is still running when
    # it is stopped a restart after it started
    store = running_service(bundle, repeat=40, workers=2)
    incarnation = 1
    call("job_add", "keep", "small_model", "small_testset", "small_label", 5)
    incarnation = _kill_coordinator_and_wait("job_add")
    for raw_args in REFUSED_OVER_HTTP:  # each refused, nothing stored, the restart is clean
        status, answer = _post(store, b'{"method": "job_add", "args": ' + raw_args + b"}")
        assert status == 400 and not answer["ok"], answer
        assert "b" not in call("job_status")["jobs"]
        incarnation = _kill_coordinator_and_wait(f"job_add {raw_args[-40:]!r}")
    refusals: tuple[tuple[str, tuple[Any, ...], str], ...] = (
            ("job_start", ("ghost",), "unknown job 'ghost'"),
            ("job_add", ("keep", "small_model", "small_testset", "small_label", 5),
             "already exists"),
            ("job_add", ("c", "small_label", "small_testset", "small_label", 5),
             "not an ONNX model"),
            ("job_stop", ("keep",), "not running"))
    for method, args, expected in refusals:
        with pytest.raises(ServiceError, match=expected):
            call(method, *args)
        incarnation = _kill_coordinator_and_wait(f"the refused {method}")
    # a record no command could have written, planted in the store: skipped, reported
    planted = Job("bad", "small_model", "small_testset", "small_label", 10, 450,
                  digests={"model": "0" * 64, "testset": "0" * 64,
                           "labels": "0" * 64}).record()
    store.write_bytes("service/jobs/bad.json",
                      json.dumps({**planted, "batch_size": 1.5}).encode())
    commands: tuple[tuple[str, tuple[Any, ...]], ...] = (
        ("job_start", ("keep",)), ("job_stop", ("keep",)), ("job_status", ()), ("members", ()),
        ("job_start", ("keep",)),
        ("job_add", ("other", "small_model", "small_testset", "small_label", 50)),
        ("job_remove", ("other",)))
    for method, args in commands:
        assert call(method, *args)["ok"]
        incarnation = _kill_coordinator_and_wait(method)
    listed = call("job_status")
    assert "--batch-size" in listed["skipped"]["bad"]
    assert set(listed["jobs"]) == {"keep"}
    with pytest.raises(ServiceError, match="job 'bad' was skipped"):
        call("job_start", "bad")
    assert call("job_remove", "bad")["removed"]
    assert incarnation == 1 + 1 + len(REFUSED_OVER_HTTP) + 4 + 7
    final = wait_until(lambda: (answer := _status_or_none()) and answer["jobs"]["keep"][
        "state"] == "done" and answer["jobs"]["keep"], 120.0, "the job done")
    merged = _read_output(store, final["run_id"])
    assert merged["ids"] == list(range(18_000)) and final["processed"] == 18_000
    model = OnnxModel(store.read_bytes("files/small_model"))
    queries = array_from_bytes(store.read_bytes("files/small_testset"), "t")
    assert merged["predictions"] == model.predict(queries).tolist()
    # job-remove takes the job's record at once, its parts and output right after its answer
    assert call("job_remove", "keep")["removed"]
    assert not [name for name in store.names() if name.startswith("service/jobs/")]
    wait_until(lambda: not [name for name in store.names() if name.startswith("jobs/")],
               30.0, "the removed job's run files gone")


def _status_of(name: str) -> dict[str, Any] | None:
    try:
        return dict(call("job_status", name, timeout_s=2.0)["jobs"][name])
    except ServiceError:
        return None


def test_a_status_call_reads_no_special_file_from_the_store(
        running_service: Callable[..., Storage], bundle: Bundle) -> None:
    """job-status reads each finished job's output from the store: a FIFO planted as the
    output (a read that would hang until someone writes it) is refused at once, not read,
    and another job is started and answered meanwhile."""
    store = running_service(bundle, repeat=1)
    call("job_add", "small", "small_model", "small_testset", "small_label", 20)
    call("job_start", "small")
    done = wait_until(lambda: (job := _status_of("small")) and job["state"] == "done" and job,
                      120.0, "the small job done")
    output = Path(store.uri) / "jobs" / done["run_id"] / "output.json"
    content = output.read_bytes()
    output.unlink()
    os.mkfifo(output)
    try:
        answer = call("job_status", timeout_s=10.0)
        assert answer["jobs"]["small"]["accuracy"] is None  # no output it could read
        call("job_add", "large", "large_model", "large_testset", "large_label", 20)
        call("job_start", "large")
        wait_until(lambda: (job := _status_of("large")) and job["processed"] > 0, 60.0,
                   "a sub-job of the large job answered")
    finally:
        output.unlink()
        output.write_bytes(content)
    assert call("job_status", "small")["jobs"]["small"]["accuracy"] == json.loads(
        content)["accuracy"]


def unseen_model() -> bytes:
    """A classifier of a kind the project ships nothing like: a (N, 3, 4, 5) input, averaged
    over its last axis, flattened, a linear layer and a softmax to 7 classes."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["cube"], ["mean"], axes=[3], keepdims=0),
         helper.make_node("Flatten", ["mean"], ["flat"], axis=1),
         helper.make_node("MatMul", ["flat", "w"], ["logits"]),
         helper.make_node("Softmax", ["logits"], ["probabilities"], axis=-1)],
        "unseen", [helper.make_tensor_value_info("cube", TensorProto.DOUBLE,
                                                 ["batch", 3, 4, 5])],
        [helper.make_tensor_value_info("probabilities", TensorProto.DOUBLE, ["batch", 7])],
        [numpy_helper.from_array(rng.normal(size=(12, 7)), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return bytes(model.SerializeToString())


@pytest.mark.subprocess
def test_a_model_of_a_kind_never_seen_is_served_through_the_cli_unchanged(
        lab: SpotLab, tmp_path: Path, running_service: Callable[..., Storage],
        bundle: Bundle) -> None:
    store = running_service(bundle, repeat=1, workers=2)
    state = tmp_path / "inference-state"
    env = {**os.environ, STATE_DIR_ENV: str(state)}
    save_record(lab, store, state)
    rng = np.random.default_rng(6)
    queries = rng.normal(size=(301, 3, 4, 5)).astype(np.float32)  # float32 rows: converted
    labels = rng.integers(0, 7, size=301)
    for name, data in (("cube.onnx", unseen_model()), ("cube_testset.npy", queries),
                       ("cube_label.npy", labels)):
        path = tmp_path / name
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            np.save(path, data)

    def invoke(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120)

    for local, name in (("cube.onnx", "cube"), ("cube_testset.npy", "cube_testset"),
                        ("cube_label.npy", "cube_label")):
        assert invoke("files-put", str(tmp_path / local), name).returncode == 0
    added = invoke("job-add", "cube", "--model", "cube", "--testset", "cube_testset",
                   "--labels", "cube_label", "--batch-size", "40")
    assert added.returncode == 0 and "8 sub-jobs" in added.stdout, added.stderr
    # a file a job uses is not replaced; one line, exit 2, the store unchanged
    kept = store.read_bytes("files/cube_label")
    replaced = invoke("files-put", str(tmp_path / "cube_testset.npy"), "cube_label")
    assert replaced.returncode == 2 and replaced.stderr.strip() == (
        "error: NAME 'cube_label': job 'cube' uses it (job-remove the job first, or put the "
        "file under another name)")
    assert store.read_bytes("files/cube_label") == kept
    # a test set the model does not take: both shapes named, nothing added
    refused = invoke("job-add", "flat", "--model", "cube", "--testset", "small_testset",
                     "--labels", "small_label")
    assert refused.returncode == 2 and refused.stderr.strip() == (
        "error: --testset: 'small_testset' holds uint8 of shape (450, 64); model 'cube' "
        "takes float64 of shape (N, 3, 4, 5)")
    assert invoke("job-start", "cube").returncode == 0
    status = wait_until(lambda: (done := invoke("job-status", "--name", "cube", "--json"))
                        and json.loads(done.stdout)["jobs"]["cube"]["state"] == "done"
                        and json.loads(done.stdout)["jobs"]["cube"], 120.0, "the job done")
    answers = OnnxModel(unseen_model()).predict(queries)
    assert status["processed"] == 301 and "flat" not in call("job_status")["jobs"]
    assert status["accuracy"] == pytest.approx(float(np.mean(answers == labels)), abs=1e-12)
    merged = _read_output(store, status["run_id"])
    assert merged["predictions"] == answers.tolist()


def reshaping_model() -> bytes:
    """A model that answers a batch of two (what job-add's check runs) but not of ten: its
    first output always has two rows."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "two_rows"], ["y"])], "reshaping",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([2, -1], np.int64), "two_rows")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def test_a_model_that_fails_on_a_worker_fails_its_job_and_nothing_else(
        running_service: Callable[..., Storage], bundle: Bundle) -> None:
    """Job-add runs the model on a first sub-job's worth of rows (2, which it answers); the
    last sub-job holds 1 row, which it does not: that sub-job fails on a worker."""
    store = running_service(bundle, repeat=1, workers=2)
    store.write_bytes("files/odd_model", reshaping_model())
    store.write_bytes("files/odd_testset", array_to_bytes(np.ones((31, 4), np.float32)))
    store.write_bytes("files/odd_label", array_to_bytes(np.zeros(31, np.int64)))
    call("job_add", "odd", "odd_model", "odd_testset", "odd_label", 2)
    call("job_add", "small", "small_model", "small_testset", "small_label", 30)
    call("job_start", "odd")
    call("job_start", "small")
    jobs = wait_until(lambda: (status := _status_or_none()) and all(
        job["state"] in ("done", "failed") for job in status["jobs"].values())
        and status["jobs"], 120.0, "both jobs ended")
    assert jobs["odd"]["state"] == "failed"
    assert "sub-job 15: odd_model: its first output has shape (2, 2) for a batch of 1" in \
        jobs["odd"]["error"] and "\n" not in jobs["odd"]["error"]
    assert jobs["small"]["state"] == "done" and jobs["small"]["processed"] == 450


# --- a hostile tenant beside an honest one ------------------------------------------------


def _members_memory() -> list[dict[str, Any]]:
    handles: list[Any] = [ray.get_actor(w["name"], namespace=NAMESPACE)
                          for w in call("members")["workers"]]
    return [dict(ray.get(handle.memory_use.remote())) for handle in handles]


def _ended(*names: str) -> dict[str, Any]:
    try:
        return dict(wait_until(lambda: (status := _status_or_none()) and all(
            status["jobs"].get(name, {}).get("state") in ("done", "failed") for name in names)
            and status["jobs"], 180.0, f"jobs {', '.join(names)} ended"))
    except AssertionError:
        jobs = (_status_or_none() or {}).get("jobs", {})
        raise AssertionError({name: {key: jobs.get(name, {}).get(key) for key in (
            "state", "processed", "queries", "reruns", "deaths", "error")}
            for name in names}) from None


def test_models_that_keep_data_outside_themselves_are_refused_by_job_add_and_by_workers(
        running_service: Callable[..., Storage], bundle: Bundle, tmp_path: Path) -> None:
    from tests.helpers.hostile_models import EXTERNAL_DATA

    store = running_service(bundle, repeat=1, workers=1)
    store.write_bytes("files/rows", array_to_bytes(np.ones((4, 2), np.float32)))
    store.write_bytes("files/truth", array_to_bytes(np.zeros(4, np.int64)))
    for place, (build, named) in EXTERNAL_DATA.items():
        store.write_bytes(f"files/m-{len(place)}", build())
        before = store.names()
        with pytest.raises(ServiceError) as refused:
            call("job_add", "hostile", f"m-{len(place)}", "rows", "truth", 2)
        assert named in str(refused.value) and "external data" in str(refused.value), place
        assert "\n" not in str(refused.value) and store.names() == before, place
    # a model that reached the store by other means (its record written by hand, say) is
    # checked again by the worker before it loads: the worker refuses it by itself
    data = EXTERNAL_DATA["initializer"][0]()
    store.write_bytes("files/planted", data)
    [worker] = wait_until(lambda: call("members")["workers"] or None, 60.0, "a worker")
    handle = ray.get_actor(worker["name"], namespace=NAMESPACE)
    run: Any = handle.run
    answer = dict(ray.get(run.remote({
        "run_id": "planted-00000000", "sub_job": 0, "first": 0, "count": 2,
        "model": "planted", "testset": "rows",
        "digests": {"model": sha256(data), "testset": sha256(store.read_bytes("files/rows")),
                    "labels": ""}}), timeout=60))
    assert answer["failed"] == "model" and "external data" in answer["error"]
    assert call("job_status")["jobs"] == {}


def test_a_batch_past_a_workers_memory_fails_its_job_naming_memory_and_the_batch_size(
        running_service: Callable[..., Storage], bundle: Bundle) -> None:
    """The queries of the hungry model's later sub-jobs ask for 4 GB each (its first, which
    job-add runs, for 1 MB): they fail in the worker's runtime, under its limit; the
    worker, the service and the honest job beside it go on."""
    from tests.helpers.hostile_models import hungry

    store = running_service(bundle, repeat=1, workers=2, worker_memory_mb=512)
    rows = np.full((40, 2), 1000.0, np.float32)
    rows[:10] = 0.001
    store.write_bytes("files/hungry_model", hungry())
    store.write_bytes("files/hungry_rows", array_to_bytes(rows))
    store.write_bytes("files/hungry_truth", array_to_bytes(np.zeros(40, np.int64)))
    call("job_add", "hungry", "hungry_model", "hungry_rows", "hungry_truth", 10)
    call("job_add", "small", "small_model", "small_testset", "small_label", 30)
    workers = {w["name"] for w in wait_until(lambda: call("members")["workers"], 60.0, "workers")}
    incarnation = call("job_status")["coordinator_incarnation"]
    call("job_start", "hungry")
    call("job_start", "small")
    jobs = _ended("hungry", "small")
    error = jobs["hungry"]["error"]
    assert jobs["hungry"]["state"] == "failed" and "\n" not in error
    assert "out of memory on a batch of 10 queries (--batch-size 10)" in error, error
    assert "384 of its 512 MiB (--worker-memory-mb)" in error, error
    assert jobs["small"]["state"] == "done" and jobs["small"]["processed"] == 450
    assert jobs["small"]["accuracy"] == pytest.approx(bundle.test_accuracy["small"])
    status = call("job_status")
    assert status["coordinator_incarnation"] == incarnation  # nothing went down
    assert {w["name"] for w in call("members")["workers"]} == workers


def test_a_sub_job_that_takes_its_runtime_down_three_times_fails_alone(
        running_service: Callable[..., Storage], bundle: Bundle) -> None:
    """One sub-job of the spinning model never ends: each time its runtime is stopped at
    --subjob-timeout it is charged, and the third time its job fails; the other job's
    sub-jobs, many queued behind it on the same workers, are never charged and all done."""
    from tests.helpers.hostile_models import spinning

    store = running_service(bundle, repeat=1, workers=2, subjob_timeout_s=2.0)
    rows = np.zeros((40, 2), np.float32)
    rows[25] = 1.0  # sub-job 2 of 4
    store.write_bytes("files/spin_model", spinning())
    store.write_bytes("files/spin_rows", array_to_bytes(rows))
    store.write_bytes("files/spin_truth", array_to_bytes(np.zeros(40, np.int64)))
    call("job_add", "spin", "spin_model", "spin_rows", "spin_truth", 10)
    call("job_add", "small", "small_model", "small_testset", "small_label", 5)
    call("job_start", "spin")
    call("job_start", "small")
    jobs = _ended("spin", "small")
    assert jobs["spin"]["state"] == "failed"
    assert jobs["spin"]["error"].startswith("sub-job 2: its runtime died or ran out of time "
                                            "on a batch of 10 queries")
    assert "3 times" in jobs["spin"]["error"] and jobs["spin"]["deaths"] == 3
    assert jobs["small"]["state"] == "done" and jobs["small"]["processed"] == 450
    assert jobs["small"]["deaths"] == 0 and jobs["small"]["error"] is None


def _runtimes_of(worker_pid: int) -> set[int]:
    """The worker's runtime processes (its children running workloads.inference.runtime)."""
    children: set[int] = set()
    for task in Path(f"/proc/{worker_pid}/task").iterdir():
        children |= {int(pid) for pid in (task / "children").read_text().split()}
    found = set()
    for pid in children:
        try:
            if b"workloads.inference.runtime" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.add(pid)
        except FileNotFoundError:
            pass
    return found


def test_a_removed_jobs_sub_jobs_leave_its_workers_at_once(
        running_service: Callable[..., Storage], bundle: Bundle) -> None:
    """The spinning model's sub-jobs but the first never end: stopped and removed, the job's sub-job
    running on each worker is stopped with its runtime and the one queued behind it never
    starts, long before --subjob-timeout; nothing of the run is left in the store (a worker
    went on with them to the timeout, writing a started marker after the removal)."""
    from tests.helpers.hostile_models import spinning

    store = running_service(bundle, repeat=1, workers=2, subjob_timeout_s=300.0)
    store.write_bytes("files/spin_model", spinning())
    rows = np.ones((40, 2), np.float32)
    rows[:5] = 0.0  # sub-job 0, job-add's probe, ends; the others never do
    store.write_bytes("files/spin_rows", array_to_bytes(rows))
    store.write_bytes("files/spin_truth", array_to_bytes(np.zeros(40, np.int64)))
    call("job_add", "spin", "spin_model", "spin_rows", "spin_truth", 5)
    run_id = call("job_start", "spin")["run_id"]
    busy = wait_until(lambda: (found := busy_workers()) and len(found) == 2 and all(
        len(w["held"]) == 2 for w in found) and found, 60.0, "both workers holding two")
    runtimes = wait_until(lambda: all(_runtimes_of(w["pid"]) for w in busy) and set().union(
        *(_runtimes_of(w["pid"]) for w in busy)), 30.0, "the runtimes spinning")
    call("job_stop", "spin")
    call("job_remove", "spin")
    wait_until(lambda: all(w["state"] == "idle" and not w["held"]
                           for w in call("members")["workers"]), 30.0, "both workers idle")
    assert not any(Path(f"/proc/{pid}").exists() for pid in runtimes)
    wait_until(lambda: not [n for n in store.names() if n.startswith(f"jobs/{run_id}/")],
               30.0, "the run's files removed")


def test_worker_caches_stay_within_their_budget_and_forget_removed_jobs(
        running_service: Callable[..., Storage], bundle: Bundle) -> None:
    """Three jobs of 49 MB test sets each through two workers whose test sets may take 128
    MB (two of them): least recently used out first; job-remove drops a job's files from
    every worker."""
    store = running_service(bundle, repeat=1, workers=2, worker_memory_mb=512)
    base = array_from_bytes(bundle.files["small_testset"], "t")
    truth = array_from_bytes(bundle.files["small_label"], "l")
    repeat = 1700  # 450 * 1700 rows of 64 bytes: 49 MB
    names = [f"big{index}" for index in range(3)]
    for index, name in enumerate(names):  # each its own bytes (and digest)
        store.write_bytes(f"files/{name}", array_to_bytes(np.roll(tiled(base, repeat), index,
                                                                  axis=0)))
        store.write_bytes(f"files/{name}_label", array_to_bytes(np.roll(
            tiled(truth, repeat), index)))
        call("job_add", name, "small_model", name, f"{name}_label", 20_000)
    workers = wait_until(lambda: len(call("members")["workers"]) == 2 and _members_memory(),
                         60.0, "two workers")
    budget = workers[0]["budget"]["limit_bytes"] // 4
    start_rss = {w["worker_rss_bytes"] for w in workers}
    peak = 0
    for pair in (names[:2], names[2:]):
        for name in pair:
            call("job_start", name)
        jobs = _ended(*pair)
        assert all(jobs[name]["state"] == "done" for name in pair), [
            jobs[name]["error"] for name in pair]
        for used in _members_memory():
            assert used["testsets_bytes"] <= budget, used
            assert len(used["testsets"]) <= 2, used  # a third would pass the budget
            peak = max(peak, used["worker_rss_bytes"])
    assert peak <= max(start_rss) + budget + 96 * 2**20, (peak, start_rss)
    for name in names:
        call("job_remove", name)
    wait_until(lambda: all(used["testsets_bytes"] == 0 and used["models_loaded"] == []
                           for used in _members_memory()), 30.0, "every cache emptied")


def test_parallel_job_adds_take_exactly_the_job_limit_within_the_admission_budget(
        running_service: Callable[..., Storage], bundle: Bundle) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from workloads.inference.coordinator import ADMISSION_BYTES
    from workloads.inference.options import MAX_JOBS

    running_service(bundle, repeat=1, workers=1)

    def add(index: int) -> str | None:
        try:
            call("job_add", f"j{index}", "small_model", "small_testset", "small_label", 50,
                 timeout_s=120.0)
        except ServiceError as error:
            return str(error)
        return None

    with ThreadPoolExecutor(max_workers=2 * MAX_JOBS) as pool:
        refusals = list(pool.map(add, range(2 * MAX_JOBS)))
    others = [r for r in refusals
              if r is not None and not r.startswith(f"NAME: the service holds {MAX_JOBS} jobs")]
    assert not others, others
    # one add counted twice for a moment (as a job and as being added) refused a 32nd
    assert refusals.count(None) == MAX_JOBS, (refusals.count(None), call("members")["admission"])
    assert len(call("job_status")["jobs"]) == MAX_JOBS
    admission = call("members")["admission"]
    assert admission["jobs_being_added"] == 0 and admission["bytes_in_flight"] == 0
    assert 0 < admission["most_bytes_in_flight"] <= ADMISSION_BYTES
