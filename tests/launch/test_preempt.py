"""Real interruptions on a stack through AWS FIS, against botocore's Stubber: every call is
checked against the FIS API and against what the test expects: `invoke preempt` starts the
pool's template once per instance, and every failure is one line naming its flag."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from launch.preempt import (
    EXPERIMENT_TAG,
    PreemptError,
    PreemptOptions,
    TemplateMissing,
    preempt,
)
from stacks.outputs import SPOT_INTERRUPTION_TEMPLATES, StackOutputsError
from tests.helpers.stack_outputs import dev_stack_outputs

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
