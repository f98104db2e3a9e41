"""`invoke netem` on AWS: SSM Run Command driven through boto3, stubbed at the boto3 boundary."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.stub import Stubber

from launch.netem_aws import discovery_script, format_statuses, netem_on_stack
from launch.ssm import run_script
from netem.profile import load_profile
from stacks.outputs import StackOutputsError
from tests.helpers.ssm_stub import (
    command_uuid,
    discovery_lines,
    expect_result,
    expect_script,
    expect_send,
    stubbed_ssm,
)

LOGIN, HPC, CLOUD, SLOW = (f"i-0000000000000000{n}" for n in "1234")
OUTPUTS = {
    "burstInstanceIds": {"login": [LOGIN], "hpc": [HPC], "cloud": [CLOUD]},
    "burstPrivateIps": {"login": ["10.0.0.10"], "hpc": ["10.0.1.10"], "cloud": ["10.1.0.10"]},
    "burstSiteCidrs": {"onprem": "10.0.0.0/16", "cloud": "10.1.0.0/16"},
    "bucketName": "burst-bucket",
    "region": "eu-west-1",
}
ONPREM_APPLY = [
    "tc qdisc del dev ens5 root 2>/dev/null || true",
    "set -e",
    "tc qdisc add dev ens5 root handle 1: htb default 0",
    "tc class add dev ens5 parent 1: classid 1:1 htb rate 10gbit ceil 10gbit",
    "tc qdisc add dev ens5 parent 1:1 handle 10: netem delay 0.15ms 0.005ms",
    "tc qdisc add dev ens5 parent 10:1 handle 20: tbf rate 55mbit burst 1024kbit latency 30ms",
    "tc filter add dev ens5 parent 1: protocol ip prio 1 u32 match ip dst 10.1.0.0/16"
    " flowid 1:1",
]
ONPREM_RESET = ["tc qdisc del dev ens5 root 2>/dev/null || true"]
CLOUD_APPLY = [
    "tc qdisc del dev enX0 root 2>/dev/null || true",
    "set -e",
    "tc qdisc add dev enX0 root handle 1: htb default 0",
    "tc class add dev enX0 parent 1: classid 1:1 htb rate 10gbit ceil 10gbit",
    "tc qdisc add dev enX0 parent 1:1 handle 20: tbf rate 55mbit burst 1024kbit latency 30ms",
    "tc filter add dev enX0 parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.0/16"
    " flowid 1:1",
]


@pytest.fixture(autouse=True)
def no_waiting_between_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    def run(ssm: Any, ids: list[str], lines: list[str], comment: str) -> Any:
        return run_script(ssm, ids, lines, comment, sleep=lambda _: None)

    monkeypatch.setattr("launch.netem_aws.run_script", run)


@pytest.fixture
def ssm() -> Iterator[tuple[Any, Stubber]]:
    with stubbed_ssm() as stubbed:
        yield stubbed


def expect_discovery(stubber: Stubber) -> None:
    expect_send(stubber, "c-disc-onprem", [LOGIN, HPC], discovery_lines("10.1.0.1"),
                "spotburst netem discover onprem")
    stubber.add_client_error("get_command_invocation", "InvocationDoesNotExist",
                             expected_params={"CommandId": command_uuid("c-disc-onprem"),
                                              "InstanceId": LOGIN})
    expect_result(stubber, "c-disc-onprem", HPC, status="InProgress")
    for instance in (LOGIN, HPC):
        expect_result(stubber, "c-disc-onprem", instance,
                      stdout="spotburst-discover iface=ens5 netem=yes\n")
    expect_script(stubber, "c-disc-cloud", [CLOUD], discovery_lines("10.0.0.1"),
                  "spotburst netem discover cloud",
                  stdout="spotburst-discover iface=enX0 netem=no\n")


def test_every_node_is_shaped_toward_the_other_site(ssm: tuple[Any, Stubber]) -> None:
    client, stubber = ssm
    expect_discovery(stubber)
    expect_script(stubber, "c-on", [LOGIN, HPC], ONPREM_APPLY, "spotburst netem apply onprem")
    expect_script(stubber, "c-cl", [CLOUD], CLOUD_APPLY, "spotburst netem apply cloud")

    statuses = netem_on_stack("dev", load_profile(bw=50), outputs=OUTPUTS, ssm=client)

    assert [(s.role, s.ok, s.interface, s.rate_mbit, s.delay_applied) for s in statuses] == [
        ("login", True, "ens5", 55.0, True),
        ("hpc", True, "ens5", 55.0, True),
        ("cloud", True, "enX0", 55.0, False),
    ]


def test_a_failed_node_is_reported_and_the_others_are_reset(ssm: tuple[Any, Stubber]) -> None:
    client, stubber = ssm
    expect_discovery(stubber)
    expect_script(stubber, "c-on", [LOGIN, HPC], ONPREM_APPLY, "spotburst netem apply onprem")
    expect_send(stubber, "c-cl", [CLOUD], CLOUD_APPLY, "spotburst netem apply cloud")
    expect_result(stubber, "c-cl", CLOUD, status="Failed", code=2,
                  stderr="Error: Specified qdisc kind is unknown.\n")
    for instance, role in ((LOGIN, "login"), (HPC, "hpc")):
        expect_script(stubber, f"c-reset-{role}", [instance], ONPREM_RESET,
                      f"spotburst netem reset {role}")

    statuses = netem_on_stack("dev", load_profile(bw=50), outputs=OUTPUTS, ssm=client)

    failed = [s for s in statuses if not s.ok]
    assert [(s.role, s.detail) for s in failed] == [
        ("cloud", "Failed (exit 2): Error: Specified qdisc kind is unknown.")]
    assert [(s.role, s.action, s.ok) for s in statuses[3:]] == [
        ("login", "reset (another node failed)", True),
        ("hpc", "reset (another node failed)", True),
    ]
    assert "FAILED" in format_statuses(statuses)


def test_reset_removes_the_shaping_on_every_node(ssm: tuple[Any, Stubber]) -> None:
    client, stubber = ssm
    expect_discovery(stubber)
    expect_script(stubber, "c-on", [LOGIN, HPC], ONPREM_RESET, "spotburst netem reset onprem")
    expect_script(stubber, "c-cl", [CLOUD], ["tc qdisc del dev enX0 root 2>/dev/null || true"],
                  "spotburst netem reset cloud")

    statuses = netem_on_stack("dev", None, outputs=OUTPUTS, ssm=client)

    assert [(s.role, s.action, s.ok) for s in statuses] == [
        ("login", "reset", True), ("hpc", "reset", True), ("cloud", "reset", True)]


def test_a_node_still_running_at_the_deadline_is_reported(ssm: tuple[Any, Stubber]) -> None:
    client, stubber = ssm
    stubber.add_response(
        "send_command", {"Command": {"CommandId": command_uuid("c1")}},
        {"InstanceIds": [SLOW], "DocumentName": "AWS-RunShellScript", "Comment": "slow",
         "TimeoutSeconds": 30, "Parameters": {"commands": ["sleep 600"]}})
    expect_result(stubber, "c1", SLOW, status="InProgress")
    ticks = iter([0.0, 10.0])

    results = run_script(client, [SLOW], ["sleep 600"], "slow", timeout_s=5,
                         sleep=lambda _: None, clock=lambda: next(ticks))

    assert results[SLOW].status == "WaitTimedOut"
    assert not results[SLOW].ok


def test_a_stack_without_burst_outputs_is_named_before_any_command() -> None:
    with pytest.raises(StackOutputsError, match="no output burstInstanceIds, burstSiteCidrs"):
        netem_on_stack("dev", load_profile(bw=50), outputs={"region": "eu-west-1"},
                       ssm=object())


@pytest.mark.subprocess
def test_the_discovery_script_finds_the_interface_on_a_real_shell() -> None:
    script = "\n".join(discovery_script("127.0.0.0/8"))
    completed = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                               check=True)
    assert "spotburst-discover iface=lo netem=" in completed.stdout
