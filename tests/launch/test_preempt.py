"""Real interruptions on a stack through AWS FIS, against botocore's Stubber: every call is
checked against the FIS API and against what the test expects. `invoke preempt` now, a
run's schedule carried out at its times, and the records made of what happened."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from launch.preempt import (
    EXPERIMENT_TAG,
    FisInterrupter,
    NodeSeen,
    PreemptError,
    PreemptOptions,
    StackSchedule,
    Started,
    TemplateMissing,
    describe_experiments,
    preempt,
    schedule_points,
    stack_preemption_records,
    stack_preemptions,
    write_preemption_records,
)
from spotlab.capacity import SpotCapacity
from spotlab.config import SpotLabConfig
from stacks.outputs import SPOT_INTERRUPTION_TEMPLATES, StackOutputsError
from tests.helpers.stack_outputs import dev_stack_outputs
from vocab.preemptions import RECORD_FIELDS

CPU_TEMPLATE = "spot-interruptions-spot-cpu-id"
GPU_TEMPLATE = "spot-interruptions-spot-gpu-id"
PROJECT_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture
def fis() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("fis", region_name="us-east-1", aws_access_key_id="test",
                          aws_secret_access_key="test")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def experiment_id(n: int) -> str:
    return f"EXP{n:016d}"


def expect_start(stubber: Stubber, template: str, n: int) -> None:
    stubber.add_response(
        "start_experiment",
        {"experiment": {"id": experiment_id(n), "experimentTemplateId": template,
                        "state": {"status": "initiating"}}},
        {"clientToken": ANY, "experimentTemplateId": template, "tags": {EXPERIMENT_TAG: ANY}})


def test_preempt_starts_the_pools_template_once_per_instance(fis: tuple[Any, Stubber]) -> None:
    client, stubber = fis
    for n in range(3):
        expect_start(stubber, GPU_TEMPLATE, n)
    started = preempt(PreemptOptions(stack="dev", pool="spot-gpu", count=3),
                      outputs=dev_stack_outputs(), client=client)
    assert [s.experiment_id for s in started] == [experiment_id(n) for n in range(3)]
    assert {s.pool for s in started} == {"spot-gpu"}
    assert all(s.started_at == s.scheduled_at for s in started)


def test_the_stack_names_a_template_per_spot_pool_in_its_outputs() -> None:
    assert dev_stack_outputs()[SPOT_INTERRUPTION_TEMPLATES] == {
        "spot-cpu": CPU_TEMPLATE, "spot-gpu": GPU_TEMPLATE}


def test_a_pool_without_a_template_is_one_line_naming_the_flag(
        fis: tuple[Any, Stubber]) -> None:
    client, _ = fis  # no call may reach FIS
    with pytest.raises(PreemptError, match=r"^--pool: stack 'dev' has no interruption template "
                                           r"for 'learner-gpu' \(its spot pools: spot-cpu, "
                                           r"spot-gpu\)$"):
        preempt(PreemptOptions(pool="learner-gpu"), outputs=dev_stack_outputs(), client=client)


def test_a_stack_without_templates_says_so(fis: tuple[Any, Stubber]) -> None:
    client, _ = fis
    outputs = {k: v for k, v in dev_stack_outputs().items() if k != SPOT_INTERRUPTION_TEMPLATES}
    with pytest.raises(StackOutputsError, match="no output spotInterruptionTemplates"):
        preempt(PreemptOptions(), outputs=outputs, client=client)


def test_a_template_aws_does_not_have_is_one_line(fis: tuple[Any, Stubber]) -> None:
    client, stubber = fis
    stubber.add_client_error("start_experiment", "ResourceNotFoundException",
                             "Experiment template not found", 404,
                             expected_params={"clientToken": ANY,
                                              "experimentTemplateId": CPU_TEMPLATE,
                                              "tags": {EXPERIMENT_TAG: ANY}})
    with pytest.raises(TemplateMissing, match=f"template {CPU_TEMPLATE} for 'spot-cpu' does "
                                              "not exist in AWS"):
        preempt(PreemptOptions(), outputs=dev_stack_outputs(), client=client)


def test_the_count_is_checked_before_anything_starts() -> None:
    from workloads.common.options import OptionError

    with pytest.raises(OptionError, match="^--count: expected an integer"):
        PreemptOptions(count=0)


# --- a schedule on a stack ------------------------------------------------------------------


def test_an_explicit_schedule_gives_its_times_to_the_pools_in_turn() -> None:
    config = SpotLabConfig(preemptions="at:90,5m,5m,10")
    assert list(schedule_points(config, ["spot-cpu", "spot-gpu"])) == [
        (10.0, "spot-cpu"), (90.0, "spot-gpu"), (300.0, "spot-cpu"), (300.0, "spot-gpu")]
    assert list(schedule_points(SpotLabConfig(preemptions="none"), ["spot-cpu"])) == []
    assert list(schedule_points(SpotLabConfig(alpha=1.0), ["spot-cpu"])) == []
    with pytest.raises(PreemptError, match="no spot pool"):
        next(schedule_points(config, []))


def test_the_chain_interrupts_the_stack_when_it_preempts_the_lab() -> None:
    config = SpotLabConfig(spot=2, alpha=0.5, refresh_s=0.1, seed=3)
    points = schedule_points(config, ["spot-cpu", "spot-gpu"])
    on_stack = [next(points) for _ in range(12)]
    # the lab's clock steps the chain just as it passes each time
    on_lab = SpotCapacity(config).interruptions_between(0.0, on_stack[-1][0] + 0.05)
    assert [(i.t, ["spot-cpu", "spot-gpu"][i.slot or 0]) for i in on_lab] == on_stack


def test_a_schedule_starts_one_experiment_at_each_time_and_records_misses(
        fis: tuple[Any, Stubber]) -> None:
    client, stubber = fis
    expect_start(stubber, CPU_TEMPLATE, 1)
    stubber.add_client_error("start_experiment", "ValidationException",
                             "Target resolution failed: no running instance", 400,
                             expected_params={"clientToken": ANY,
                                              "experimentTemplateId": GPU_TEMPLATE,
                                              "tags": {EXPERIMENT_TAG: ANY}})
    expect_start(stubber, CPU_TEMPLATE, 3)
    interrupter = FisInterrupter("dev", {"spot-cpu": CPU_TEMPLATE, "spot-gpu": GPU_TEMPLATE},
                                 client)
    schedule = StackSchedule(interrupter, schedule_points(
        SpotLabConfig(preemptions="at:0.05,0.1,0.15"), ["spot-cpu", "spot-gpu"]))
    schedule.start()
    assert schedule.wait(30.0), "the schedule did not run out"
    assert [s.experiment_id for s in schedule.started] == [experiment_id(1), experiment_id(3)]
    assert [round(s.scheduled_at - schedule.start_at, 2) for s in schedule.started] == [0.05,
                                                                                       0.15]
    assert all(s.started_at >= s.scheduled_at for s in schedule.started)
    (missed,) = schedule.missed
    assert missed["pool"] == "spot-gpu" and "no running instance" in missed["error"]


def test_a_stopped_schedule_starts_nothing_more(fis: tuple[Any, Stubber]) -> None:
    client, _ = fis
    schedule = StackSchedule(FisInterrupter("dev", {"spot-cpu": CPU_TEMPLATE}, client),
                             schedule_points(SpotLabConfig(preemptions="at:1h"), ["spot-cpu"]))
    with schedule:
        pass
    assert schedule.started == [] and schedule.missed == []


def test_a_runs_schedule_on_a_stack_starts_experiments_and_leaves_its_records(
        fis: tuple[Any, Stubber], tmp_path: Path) -> None:
    client, stubber = fis
    outputs = dev_stack_outputs()
    templates = outputs[SPOT_INTERRUPTION_TEMPLATES]
    expect_start(stubber, templates["spot-cpu"], 1)
    expect_start(stubber, templates["spot-gpu"], 2)
    for n in (1, 2):
        stubber.add_response("get_experiment", {"experiment": {
            "id": experiment_id(n), "state": {"status": "running"}, "actions": {}}},
            {"id": experiment_id(n)})
        stubber.add_response("list_experiment_resolved_targets", {"resolvedTargets": []},
                             {"experimentId": experiment_id(n)})
    shown: list[str] = []
    config = SpotLabConfig(preemptions="at:0.05,0.1")
    # Ray's node table is watched on the lab (tests/spotlab/test_rebalance.py); here no
    # dashboard answers, and the run goes on
    with stack_preemptions("dev", config, "http://127.0.0.1:9", "token", tmp_path,
                           shown.append, outputs=outputs, client=client,
                           poll_s=0.05) as schedule:
        assert schedule is not None and schedule.wait(30.0)
    assert [s.pool for s in schedule.started] == ["spot-cpu", "spot-gpu"]
    assert shown[0].startswith("preemptions: at:0.05,0.1 carried out on stack 'dev'")
    assert (tmp_path / "stack" / "preemptions.jsonl").read_text() == ""  # FIS not acted yet
    record = json.loads((tmp_path / "stack" / "experiments.json").read_text())
    assert record["schedule"] == "at:0.05,0.1" and record["missed"] == []
    assert [e["experiment_id"] for e in record["experiments"]] == [experiment_id(1),
                                                                   experiment_id(2)]


def test_without_a_schedule_a_stack_run_starts_nothing(tmp_path: Path) -> None:
    for config in (None, SpotLabConfig(), SpotLabConfig(preemptions="none")):
        with stack_preemptions("dev", config, "http://127.0.0.1:9", None, tmp_path,
                               print) as schedule:
            assert schedule is None
    assert not (tmp_path / "stack").exists()


def test_a_schedule_for_a_cluster_at_an_address_is_refused_before_anything_runs(
        tmp_path: Path) -> None:
    from launch.targets import TargetError, run_workload
    from launch.workload import workload_run
    from workloads.doll.options import DOLL_SPEC

    run = workload_run("doll", "workloads.doll", DOLL_SPEC, DOLL_SPEC.default())
    with pytest.raises(TargetError, match="^--preemptions: carried out on the spot lab"):
        run_workload(run, address="http://127.0.0.1:9", out=tmp_path / "run",
                     lab=SpotLabConfig(preemptions="at:10"))
    assert not (tmp_path / "run").exists()


# --- records ------------------------------------------------------------------------------


def at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def test_experiments_and_the_node_table_make_the_records(fis: tuple[Any, Stubber],
                                                          tmp_path: Path) -> None:
    client, stubber = fis
    started = [Started("spot-cpu", CPU_TEMPLATE, experiment_id(1), 1000.0, 1000.4),
               Started("spot-cpu", CPU_TEMPLATE, experiment_id(2), 1300.0, 1300.2),
               Started("spot-gpu", GPU_TEMPLATE, experiment_id(3), 1600.0, 1600.1)]
    for one, (status, action) in zip(started, [("completed", (1001.0, 1121.0)),
                                              ("completed", (1301.0, 1421.0)),
                                              ("failed", None)], strict=True):
        actions = {} if action is None else {"interrupt": {
            "actionId": "aws:ec2:send-spot-instance-interruptions",
            "state": {"status": "completed"}, "startTime": at(action[0]),
            "endTime": at(action[1])}}
        stubber.add_response("get_experiment", {"experiment": {
            "id": one.experiment_id, "state": {"status": status}, "actions": actions}},
            {"id": one.experiment_id})
        instance = f"arn:aws:ec2:us-east-1:123:instance/i-{one.experiment_id[-1]}"
        targets = [] if action is None else [{
            "resourceType": "aws:ec2:spot-instance", "targetName": "SpotInstances",
            "targetInformation": {"arn": instance}}]
        stubber.add_response("list_experiment_resolved_targets", {"resolvedTargets": targets},
                             {"experimentId": one.experiment_id})
    experiments = describe_experiments(client, started)
    assert [e["instance_ids"] for e in experiments] == [["i-1"], ["i-2"], []]
    assert experiments[0]["action_started_at"] == 1001.0 and experiments[2]["status"] == "failed"
    nodes = [
        NodeSeen("head", {}, 900.0, 900.0, is_head=True),
        NodeSeen("w1", {"pool": "spot"}, 950.0, 950.0, ended_at=1119.0,
                 state_message="Terminated due to preemption: spot interruption"),
        NodeSeen("w2", {"pool": "spot"}, 950.0, 950.0),  # FIS missed this run's nodes
        NodeSeen("w3", {"pool": "spot"}, 1050.0, 1050.0),  # w1's replacement
    ]
    rows = stack_preemption_records(experiments, nodes)
    assert [tuple(row) for row in rows] == [RECORD_FIELDS] * 2  # the failed one: no notice
    first, second = rows
    assert first == {
        "scheduled_at": 1000.0, "rebalance_at": 1001.0, "notice_at": 1001.0,
        "drain_seen_at": None, "gone_at": 1119.0, "replacement_joined_at": 1050.0,
        "cause": "notice", "node": "i-1", "ray_node_id": "w1", "pool": "spot-cpu",
        "instance_id": "i-1"}
    assert second["ray_node_id"] is None and second["gone_at"] == 1421.0  # FIS's end
    path = write_preemption_records(tmp_path, rows)
    assert path == tmp_path / "stack" / "preemptions.jsonl"
    assert [json.loads(line) for line in path.read_text().splitlines()] == rows


# --- `invoke preempt` ends a failure in one line ----------------------------------------------


def fake_pulumi(bin_dir: Path, outputs: dict[str, Any]) -> dict[str, str]:
    bin_dir.mkdir()
    script = bin_dir / "pulumi"
    printed = json.dumps(outputs)
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write({printed!r})\n")
    script.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    return {**env, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "AWS_SHARED_CREDENTIALS_FILE": str(bin_dir / "none"),
            "AWS_CONFIG_FILE": str(bin_dir / "none"), "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.mark.subprocess
@pytest.mark.parametrize(("flags", "line"), [
    ([], "error: AWS: Unable to locate credentials; configure AWS credentials"),
    (["--pool", "spot"], "error: --pool: stack 'dev' has no interruption template for 'spot'"),
    (["--count", "0"], "error: --count: expected an integer in [1, 100], got '0'"),
])
def test_invoke_preempt_fails_in_one_line(tmp_path: Path, flags: list[str], line: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "invoke", "preempt", "--stack", "dev", *flags],
        cwd=PROJECT_DIR, env=fake_pulumi(tmp_path / "bin", dev_stack_outputs(show_secrets=False)),
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(line), done.stderr
