"""`invoke netem` on AWS: SSM Run Command driven through boto3, stubbed at the boto3 boundary."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from launch.netem_aws import discovery_script, format_statuses, netem_on_stack
from launch.ssm import run_script
from netem.profile import load_profile
from stacks.outputs import StackOutputsError

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
    client = boto3.client("ssm", region_name="eu-west-1", aws_access_key_id="test",
                          aws_secret_access_key="test")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def command_uuid(name: str) -> str:
    """SSM command ids are UUIDs; botocore validates their length."""
    return str(uuid.uuid5(uuid.NAMESPACE_OID, name))


def expect_send(stubber: Stubber, command_id: str, instance_ids: list[str],
                lines: Any = ANY) -> None:
    stubber.add_response(
        "send_command",
        {"Command": {"CommandId": command_uuid(command_id)}},
        {"InstanceIds": instance_ids, "DocumentName": "AWS-RunShellScript", "Comment": ANY,
         "TimeoutSeconds": ANY, "Parameters": {"commands": lines}},
    )


def expect_result(stubber: Stubber, command_id: str, instance_id: str, status: str = "Success",
                  stdout: str = "", stderr: str = "", code: int = 0) -> None:
    stubber.add_response(
        "get_command_invocation",
        {"CommandId": command_uuid(command_id), "InstanceId": instance_id, "Status": status,
         "ResponseCode": code, "StandardOutputContent": stdout,
         "StandardErrorContent": stderr},
        {"CommandId": command_uuid(command_id), "InstanceId": instance_id},
    )


def expect_discovery(stubber: Stubber) -> None:
    expect_send(stubber, "c-disc-onprem", [LOGIN, HPC])
    stubber.add_client_error("get_command_invocation", "InvocationDoesNotExist",
                             expected_params={"CommandId": command_uuid("c-disc-onprem"),
                                              "InstanceId": LOGIN})
    expect_result(stubber, "c-disc-onprem", HPC, status="InProgress")
    for instance in (LOGIN, HPC):
        expect_result(stubber, "c-disc-onprem", instance,
                      stdout="spotburst-discover iface=ens5 netem=yes\n")
    expect_send(stubber, "c-disc-cloud", [CLOUD])
    expect_result(stubber, "c-disc-cloud", CLOUD,
                  stdout="spotburst-discover iface=enX0 netem=no\n")


def test_every_node_is_shaped_toward_the_other_site(ssm: tuple[Any, Stubber]) -> None:
    client, stubber = ssm
    expect_discovery(stubber)
    expect_send(stubber, "c-on", [LOGIN, HPC], ONPREM_APPLY)
    expect_result(stubber, "c-on", LOGIN)
    expect_result(stubber, "c-on", HPC)
    expect_send(stubber, "c-cl", [CLOUD], CLOUD_APPLY)
    expect_result(stubber, "c-cl", CLOUD)

    statuses = netem_on_stack("dev", load_profile(bw=50), outputs=OUTPUTS, ssm=client)

    assert [(s.role, s.ok, s.interface, s.rate_mbit, s.delay_applied) for s in statuses] == [
        ("login", True, "ens5", 55.0, True),
        ("hpc", True, "ens5", 55.0, True),
        ("cloud", True, "enX0", 55.0, False),
    ]


def test_a_failed_node_is_reported_and_the_others_are_reset(ssm: tuple[Any, Stubber]) -> None:
    client, stubber = ssm
    expect_discovery(stubber)
    expect_send(stubber, "c-on", [LOGIN, HPC], ONPREM_APPLY)
    expect_result(stubber, "c-on", LOGIN)
    expect_result(stubber, "c-on", HPC)
    expect_send(stubber, "c-cl", [CLOUD], CLOUD_APPLY)
    expect_result(stubber, "c-cl", CLOUD, status="Failed", code=2,
                  stderr="Error: Specified qdisc kind is unknown.\n")
    for instance in (LOGIN, HPC):
        expect_send(stubber, f"c-reset-{instance[-1]}", [instance],
                    ["tc qdisc del dev ens5 root 2>/dev/null || true"])
        expect_result(stubber, f"c-reset-{instance[-1]}", instance)

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
    expect_send(stubber, "c-on", [LOGIN, HPC],
                ["tc qdisc del dev ens5 root 2>/dev/null || true"])
    expect_result(stubber, "c-on", LOGIN)
    expect_result(stubber, "c-on", HPC)
    expect_send(stubber, "c-cl", [CLOUD], ["tc qdisc del dev enX0 root 2>/dev/null || true"])
    expect_result(stubber, "c-cl", CLOUD)

    statuses = netem_on_stack("dev", None, outputs=OUTPUTS, ssm=client)

    assert [(s.role, s.action, s.ok) for s in statuses] == [
        ("login", "reset", True), ("hpc", "reset", True), ("cloud", "reset", True)]


def test_a_node_still_running_at_the_deadline_is_reported(ssm: tuple[Any, Stubber]) -> None:
    client, stubber = ssm
    expect_send(stubber, "c1", [SLOW])
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
