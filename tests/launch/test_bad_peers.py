"""A peer that is silent, drips its answer a byte at a time, or speaks garbage: every task
that talks to one the user names (--endpoint-url, --address, the inference service's
recorded endpoint) ends in one line, within its bound, and honours Ctrl-C and SIGTERM while
it waits. The tasks are found from their option specs (as tests/launch/test_probe_classes.py
finds them), so a new task is covered the day it is added. In-process with the deadlines
shortened (module constants); one test per class runs the real command with the real bound."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from invoke import Context
from invoke.exceptions import Exit

import tasks
from launch import inference, ray_address, ray_jobs
from tests.helpers.peers import BAD_PEERS, LoopbackServer, bad_peer
from tests.helpers.processes import FAKE_CREDENTIALS, ctrl_c_as_from_a_terminal
from tests.launch.test_probe_classes import takers
from workloads.common import aws_client

PROJECT_DIR = Path(__file__).resolve().parents[2]
SHORT_S = 1.0
"""Each shortened deadline."""
BOUND_S = 30.0
"""What a user waits at most for the one line, with the real deadlines."""


@pytest.fixture(scope="module")
def peers() -> Iterator[dict[str, LoopbackServer]]:
    servers = {mode: LoopbackServer(mode) for mode in BAD_PEERS}
    try:
        yield servers
    finally:
        for server in servers.values():
            server.close()


@pytest.fixture
def short_deadlines(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(aws_client, "CONNECT_TIMEOUT_S", SHORT_S)
    monkeypatch.setattr(aws_client, "READ_TIMEOUT_S", SHORT_S)
    monkeypatch.setattr(aws_client, "ATTEMPT_DEADLINE_S", SHORT_S)
    monkeypatch.setattr(ray_jobs, "HTTP_READ_TIMEOUT_S", SHORT_S)
    monkeypatch.setattr(ray_jobs, "HTTP_DEADLINE_S", SHORT_S)
    monkeypatch.setattr(ray_address, "ANSWER_DEADLINE_S", SHORT_S)
    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(inference.STATE_DIR_ENV, str(tmp_path / "inference"))


def ended(task: Any, peer: LoopbackServer, within_s: float, **flags: Any) -> str:
    """How the task ended (a failure, within `within_s` of its first connection to the peer,
    if it made one: what it computed before, a stack's plan, is not waiting on the peer)."""
    peer.first_accept = None
    with pytest.raises(Exit) as ending:
        task(Context(), **flags)
    now = time.monotonic()
    message = str(ending.value.message)
    assert ending.value.code in (1, 2), message
    if peer.first_accept is not None:
        assert now - peer.first_accept < within_s, (now - peer.first_accept, message)
    return message


def ended_in_one_line(task: Any, peer: LoopbackServer, within_s: float, **flags: Any) -> str:
    message = ended(task, peer, within_s, **flags)
    assert message.startswith("error: ") and "\n" not in message.strip(), message
    return message


def test_the_classes_reach_the_tasks_they_name() -> None:
    assert {task for task, _, _ in takers(lambda o: o.dest == "endpoint_url")} >= {
        "leftovers", "fetch_prices", "preflight"}
    assert {task for task, _, _ in takers(lambda o: o.dest == "address")} >= {
        "infer_up", "run_doll", "run_rl", "run_elastic", "run_inference"}


@pytest.mark.slow  # a few shortened deadlines per task
def test_every_task_taking_an_endpoint_url_ends_in_one_line_on_a_bad_peer(
        short_deadlines: None) -> None:
    bound = aws_client.MAX_ATTEMPTS * SHORT_S + aws_client.RETRY_BACKOFF_S + 2.0
    for task, _, _ in takers(lambda o: o.dest == "endpoint_url"):
        for mode in BAD_PEERS:
            with bad_peer(mode) as peer:  # its own: no other task's connection is counted
                said = ended(getattr(tasks, task), peer, 120.0, endpoint_url=peer.url)
                waited = time.monotonic() - (peer.first_accept or time.monotonic())
                url = peer.url
            # preflight (also up's) goes on to its other checks, tools run as processes, after
            # the endpoint's: the bound holds for a task that only waits on the peer
            assert waited < bound or said.startswith("preflight"), (task, mode, waited)
            if "pulumi" in said.lower() and url not in said:
                continue  # up, destroy, preempt: the Pulumi CLI first, no peer reached
            # one line (preflight: its one check of the endpoint, in its report of checks)
            naming = [line for line in said.splitlines() if url in line]
            assert len(naming) == 1, (task, mode, said)
            assert said.startswith(("error: ", "preflight")), (task, mode, said)


@pytest.mark.slow
def test_every_task_taking_an_address_ends_in_one_line_on_a_bad_peer(
        peers: dict[str, LoopbackServer], short_deadlines: None, tmp_path: Path) -> None:
    for task, _, option in takers(lambda o: o.dest == "address"):
        for mode, peer in peers.items():
            address = peer.url if option.base is str and task != "infer_up" else \
                f"127.0.0.1:{peer.port}"
            flags = {"address": address}
            if task != "infer_up":
                flags["out"] = str(tmp_path / "never")
            said = ended_in_one_line(getattr(tasks, task), peer, 3 * SHORT_S + 2.0, **flags)
            assert str(peer.port) in said, (task, mode, said)
            assert not (tmp_path / "never").exists()


def service_record(url: str, store: Path) -> None:
    store.mkdir(parents=True, exist_ok=True)
    inference.ServiceRecord("127.0.0.1:1", {}, str(store), None, None, 0.0, "token",
                            url).save()


SERVICE_COMMANDS = {"job_status": {}, "job_stop": {"name": "a"}, "job_remove": {"name": "a"},
                    "members": {}, "job_start": {"name": "a"},
                    "job_add": {"name": "a", "model": "m", "testset": "t", "labels": "l"}}
"""The tasks that send the service a command over its recorded endpoint. Each gives up on
an endpoint that does not prove itself within COMMAND_TIMEOUT_S (job-add and job-start,
which check a job's files first, wait longer only for a proven endpoint's answer)."""


@pytest.mark.slow
def test_every_service_command_ends_in_one_line_on_a_bad_endpoint(
        peers: dict[str, LoopbackServer], short_deadlines: None, tmp_path: Path) -> None:
    for mode, peer in peers.items():
        service_record(peer.url, tmp_path / "store")
        for task, flags in SERVICE_COMMANDS.items():
            said = ended_in_one_line(getattr(tasks, task), peer, 2 * SHORT_S + 2.0, **flags)
            assert "does not answer" in said or "no command endpoint" in said, (task, mode)


def run_until(command: list[str], env: dict[str, str], peer: LoopbackServer,
              signal_number: int | None) -> tuple[subprocess.CompletedProcess[str], float]:
    """The real command; with `signal_number`, that signal once it waits on the peer. Its
    result and the seconds from its first connection to the peer to its end."""
    peer.accepted.clear()
    peer.first_accept = None
    child = subprocess.Popen([sys.executable, "-m", "invoke", *command], cwd=PROJECT_DIR,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, preexec_fn=ctrl_c_as_from_a_terminal)
    try:
        assert peer.accepted.wait(120), "the task never reached the peer"
        if signal_number is not None:
            child.send_signal(signal_number)
        stdout, stderr = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert peer.first_accept is not None
    return (subprocess.CompletedProcess(command, child.returncode, stdout, stderr),
            time.monotonic() - peer.first_accept)


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.stderr.count("\n") == 1, done.stderr[-2000:]
    return done.stderr


@pytest.mark.subprocess
@pytest.mark.slow  # the real bound, once per class
def test_the_real_bounds_hold_for_each_class(tmp_path: Path) -> None:
    import os

    env = {**os.environ, **FAKE_CREDENTIALS, inference.STATE_DIR_ENV: str(tmp_path / "inf")}
    with bad_peer("silent") as silent:
        done, waited = run_until(["leftovers", "--endpoint-url", silent.url], env, silent,
                                 None)
        assert done.returncode in (1, 2) and silent.url in done.stderr, done.stderr[-2000:]
        assert waited < BOUND_S, waited
        assert done.stderr.splitlines()[-1].startswith("error: ")
    with bad_peer("drip") as dripping:
        done, waited = run_until(["run-doll", "--address", dripping.url, "--out",
                                  str(tmp_path / "never")], env, dripping, None)
        assert one_line(done).startswith(f"error: --address: the Ray dashboard at "
                                         f"{dripping.url} did not answer")
        assert waited < BOUND_S, waited
    with bad_peer("silent") as silent:
        done, waited = run_until(["infer-up", "--address", f"127.0.0.1:{silent.port}",
                                  "--store", str(tmp_path / "store")], env, silent, None)
        assert one_line(done).startswith(f"error: nothing at 127.0.0.1:{silent.port} answers "
                                         "as a Ray cluster does"), done.stderr
        assert waited < BOUND_S, waited


@pytest.mark.subprocess
@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM],
                         ids=["ctrl-c", "sigterm"])
def test_job_status_on_a_dripping_endpoint_honours_ctrl_c_and_sigterm(
        tmp_path: Path, signal_number: int) -> None:
    """Its endpoint sends whole headers, then its body a byte at a time, forever: the task
    ends at the signal, in one line, exit 130 (it ignored both, until SIGKILL)."""
    import os

    with bad_peer("drip-body") as peer:
        env = {**os.environ, inference.STATE_DIR_ENV: str(tmp_path / "inf")}
        old = os.environ.get(inference.STATE_DIR_ENV)
        os.environ[inference.STATE_DIR_ENV] = env[inference.STATE_DIR_ENV]
        try:
            service_record(peer.url, tmp_path / "store")
        finally:
            if old is None:
                del os.environ[inference.STATE_DIR_ENV]
            else:
                os.environ[inference.STATE_DIR_ENV] = old
        done, waited = run_until(["job-status"], env, peer, signal_number)
    assert done.returncode == 130, done.stderr[-2000:]
    assert one_line(done).startswith("interrupted: removed nothing"), done.stderr
    assert waited < 10.0, waited
