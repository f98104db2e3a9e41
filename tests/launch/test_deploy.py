"""`invoke up` and `invoke destroy` around the Pulumi CLI, faked at the process boundary: a
`pulumi` script on PATH that logs its arguments. Nothing here reaches AWS."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest
from invoke import Context, Exit

import launch.account.deploy_gate
import launch.account.stack
import tasks
from launch.account.deploy_gate import GateResult
from launch.account.leftovers import Leftover, LeftoverReport

pytestmark = pytest.mark.subprocess  # the fake pulumi CLI (and the real gate) are processes
PASSED = GateResult("preflight of stack 'dev': all checks passed", True, 1.04, 7.26)


@pytest.fixture
def pulumi_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake `pulumi` first on PATH: logs each call; `destroy` exits $FAKE_DESTROY_CODE."""
    log = tmp_path / "pulumi.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "pulumi"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {log}\n'
        '[ "$1" = whoami ] && echo alice\n'
        '[ "$1" = destroy ] && exit "${FAKE_DESTROY_CODE:-0}"\n'
        "exit 0\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    log.touch()
    return log


def _run(body: Any, **flags: Any) -> tuple[int, str]:
    try:
        body(Context(), **flags)
    except Exit as exited:
        return exited.code, str(exited.message)
    return 0, ""


def _calls(log: Path) -> list[str]:
    return log.read_text().splitlines()


def test_up_with_a_failing_preflight_runs_no_pulumi_up(
    pulumi_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped config, no AWS credentials: the real gate (its own process)
    fails; each failing check is one line with its fix, and `pulumi up` never runs."""
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    code, report = _run(tasks.up.body, stack="dev", yes=True, endpoint_url="http://127.0.0.1:9")
    assert code == 2, report
    failed = [line for line in report.splitlines() if line.startswith("  FAIL")]
    assert failed[0].startswith(
        "  FAIL  stack config: Missing required configuration variable 'spotburst:adminCidrs'")
    assert "pulumi config set --path 'spotburst:adminCidrs[0]' <your-ip>/32" in failed[0]
    assert any(line.startswith("  FAIL  AWS credentials: ") for line in failed)
    assert report.splitlines()[-1].endswith("nothing was deployed; fix each line above")
    assert [call for call in _calls(pulumi_log) if not call.startswith("whoami")] == []


def test_up_refused_at_the_budget_prompt_runs_no_pulumi(
    pulumi_log: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(launch.account.deploy_gate, "gate_in_subprocess", lambda *a: PASSED)
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    assert _run(tasks.up.body, stack="dev") == (
        1, "not deployed: the budget was not confirmed")
    printed = capsys.readouterr().out
    assert "Hourly cost: $1.04 at minimum scale, $7.26 at maximum scale" in printed
    assert _calls(pulumi_log) == []


def test_up_asks_then_deploys_and_yes_skips_the_question(
    pulumi_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch.account.deploy_gate, "gate_in_subprocess", lambda *a: PASSED)
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    assert _run(tasks.up.body, stack="dev") == (0, "")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # --yes must not read it
    assert _run(tasks.up.body, stack="dev", yes=True) == (0, "")
    assert _calls(pulumi_log) == ["up --stack dev", "up --yes --stack dev"]


def _report(*leftovers: Leftover) -> LeftoverReport:
    return LeftoverReport("us-east-1", "dev", ("spotburst-dev-spot",), list(leftovers))


def test_destroy_lists_what_is_left_with_its_command(
    pulumi_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[str, str | None]] = []
    volume = Leftover("EBS volume", "vol-0abc", "available",
                      "tag kubernetes.io/cluster/spotburst-dev-spot",
                      "aws ec2 delete-volume --region us-east-1 --volume-id vol-0abc")

    def leftovers_for_stack(stack: str, endpoint_url: str | None = None) -> LeftoverReport:
        asked.append((stack, endpoint_url))
        return _report(volume)

    monkeypatch.setattr(launch.account.stack, "leftovers_for_stack", leftovers_for_stack)
    code, listing = _run(tasks.destroy.body, stack="dev", yes=True, endpoint_url="http://x")
    assert code == 1
    assert "  EBS volume vol-0abc (available; tag kubernetes.io/cluster/spotburst-dev-spot)" in (
        listing)
    assert "    delete: aws ec2 delete-volume --region us-east-1 --volume-id vol-0abc" in listing
    assert _calls(pulumi_log) == ["destroy --yes --stack dev"]
    assert asked == [("dev", "http://x")]


def test_destroy_says_nothing_left_and_a_failed_destroy_lists_nothing(
    pulumi_log: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[str] = []

    def leftovers_for_stack(stack: str, endpoint_url: str | None = None) -> LeftoverReport:
        asked.append(stack)
        return _report()

    monkeypatch.setattr(launch.account.stack, "leftovers_for_stack", leftovers_for_stack)
    assert _run(tasks.destroy.body, stack="dev") == (0, "")
    assert capsys.readouterr().out.startswith("nothing left: ")
    monkeypatch.setenv("FAKE_DESTROY_CODE", "3")
    assert _run(tasks.destroy.body, stack="dev")[0] == 3
    assert asked == ["dev"]
