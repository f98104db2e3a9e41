"""An SSM client stubbed at the boto3 boundary with botocore's Stubber: every call's
parameters are checked against the SSM API and against what the test expects."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from botocore.stub import Stubber

TIMEOUT_S = 300  # launch.ssm.run_script's default


@contextmanager
def stubbed_ssm(region: str = "eu-west-1") -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("ssm", region_name=region, aws_access_key_id="test",
                          aws_secret_access_key="test")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def command_uuid(name: str) -> str:
    """SSM command ids are UUIDs; botocore validates their length."""
    return str(uuid.uuid5(uuid.NAMESPACE_OID, name))


def expect_send(stubber: Stubber, command_id: str, instance_ids: list[str], lines: list[str],
                comment: str) -> None:
    stubber.add_response(
        "send_command",
        {"Command": {"CommandId": command_uuid(command_id)}},
        {"InstanceIds": instance_ids, "DocumentName": "AWS-RunShellScript", "Comment": comment,
         "TimeoutSeconds": TIMEOUT_S, "Parameters": {"commands": lines}},
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


def expect_script(stubber: Stubber, command_id: str, instance_ids: list[str], lines: list[str],
                  comment: str, stdout: str = "") -> None:
    """One script sent to `instance_ids`, succeeding at once on each."""
    expect_send(stubber, command_id, instance_ids, lines, comment)
    for instance_id in instance_ids:
        expect_result(stubber, command_id, instance_id, stdout=stdout)


def expect_secure_parameter(stubber: Stubber, name: str, value: str) -> None:
    """One decrypted read of the SecureString `name`."""
    stubber.add_response(
        "get_parameter",
        {"Parameter": {"Name": name, "Type": "SecureString", "Value": value, "Version": 1}},
        {"Name": name, "WithDecryption": True},
    )


def discovery_lines(peer_probe_ip: str) -> list[str]:
    """The discovery script for a peer site whose first host is `peer_probe_ip`, by hand."""
    return [
        "set -eu",
        f"iface=$(ip -o route get {peer_probe_ip} | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p')",
        'test -n "$iface"',
        "if modprobe sch_netem 2>/dev/null; then netem=yes; else netem=no; fi",
        'echo "spotburst-discover iface=$iface netem=$netem"',
    ]
