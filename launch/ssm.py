"""Shell scripts on EC2 instances through SSM Run Command (boto3), waited for per node."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from vocab.errors import RunFailed

DOCUMENT = "AWS-RunShellScript"
TERMINAL = {"Success", "Failed", "Cancelled", "TimedOut", "DeliveryTimedOut", "Undeliverable",
            "Terminated", "InvalidPlatform", "AccessDenied"}


@dataclass(frozen=True)
class InvocationResult:
    instance_id: str
    status: str
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.status == "Success" and self.exit_code == 0


def run_script(
    ssm: Any,
    instance_ids: list[str],
    lines: list[str],
    comment: str,
    *,
    timeout_s: float = 300.0,
    poll_s: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, InvocationResult]:
    """Run one shell script on every instance; wait until each ends or `timeout_s` passes.

    Returns one result per instance; an instance still running at the deadline is reported
    with status "WaitTimedOut".
    """
    if not instance_ids:
        return {}
    sent = ssm.send_command(
        InstanceIds=instance_ids,
        DocumentName=DOCUMENT,
        Comment=comment[:100],
        TimeoutSeconds=max(30, int(timeout_s)),
        Parameters={"commands": lines},
    )
    command_id = sent["Command"]["CommandId"]
    results: dict[str, InvocationResult] = {}
    deadline = clock() + timeout_s
    while True:
        for instance_id in instance_ids:
            if instance_id not in results:
                result = _invocation(ssm, command_id, instance_id)
                if result is not None:
                    results[instance_id] = result
        if len(results) == len(instance_ids):
            return results
        if clock() >= deadline:
            break
        sleep(poll_s)
    for instance_id in instance_ids:
        results.setdefault(instance_id, InvocationResult(
            instance_id, "WaitTimedOut", -1, "", f"no result within {timeout_s:g} s"))
    return results


class ParameterUnreadable(RunFailed, RuntimeError):
    """An SSM parameter the run needs could not be read."""


def read_secure_parameter(ssm: Any, name: str) -> str:
    """A SecureString parameter's value, decrypted; kept in memory by the caller."""
    try:
        answer = ssm.get_parameter(Name=name, WithDecryption=True)
    except ClientError as error:
        raise ParameterUnreadable(
            f"cannot read SSM parameter {name}: {error.response['Error'].get('Message', error)}"
        ) from None
    return str(answer["Parameter"]["Value"])


def _invocation(ssm: Any, command_id: str, instance_id: str) -> InvocationResult | None:
    """The finished invocation on one instance, or None while it is pending or running."""
    try:
        answer = ssm.get_command_invocation(CommandId=command_id, InstanceId=instance_id)
    except ClientError as error:
        if error.response["Error"]["Code"] == "InvocationDoesNotExist":
            return None  # not registered yet right after send_command
        raise
    status = answer["Status"]
    if status not in TERMINAL:
        return None
    return InvocationResult(
        instance_id=instance_id,
        status=status,
        exit_code=int(answer.get("ResponseCode", -1)),
        stdout=answer.get("StandardOutputContent", ""),
        stderr=answer.get("StandardErrorContent", ""),
    )
