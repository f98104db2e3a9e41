"""A Ray cluster's GCS address (HOST:PORT, or ray://HOST:PORT of its client server) checked
to answer as Ray does before a driver connects to it: `ray.init` keeps reconnecting for a
minute or more to a server that is silent, drips bytes or speaks something else, and cannot
be interrupted meanwhile. Both of Ray's servers speak gRPC; anything that answers a gRPC call
within ANSWER_DEADLINE_S (even with an error status: a method it lacks, a token it wants) is
taken as one."""

from __future__ import annotations

from vocab.errors import UserError
from workloads.common.deadline import DeadlineExceeded, call_within

CONNECT_TIMEOUT_S = 2.0
ANSWER_DEADLINE_S = 10.0
PROBE_METHOD = "/ray.rpc.NodeInfoGcsService/GetClusterId"
"""A call every GCS answers (the first a driver makes); the answer itself is not read."""


class NotRay(UserError, ConnectionError):
    """Nothing at the address answers as a Ray cluster does."""


def check_answers_as_ray(address: str, deadline_s: float | None = None) -> None:
    """NotRay in one line naming `address` unless a gRPC server answers there within
    `deadline_s` (default ANSWER_DEADLINE_S; Ctrl-C and SIGTERM are honoured while it
    waits)."""
    import socket

    deadline_s = ANSWER_DEADLINE_S if deadline_s is None else deadline_s

    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)),
                                      timeout=CONNECT_TIMEOUT_S):
            pass
    except (OSError, ValueError):
        raise NotRay(f"the Ray cluster at {address} does not answer (nothing listens there)") \
            from None
    try:
        answered = call_within(lambda: _grpc_answers(f"{host or '127.0.0.1'}:{port}",
                                                     deadline_s), deadline_s + 1.0)
    except DeadlineExceeded:
        answered = None
    if answered is not True:
        what = "it speaks no gRPC" if answered is False else f"no answer within {deadline_s:g} s"
        raise NotRay(f"nothing at {address} answers as a Ray cluster does ({what}; expected "
                     "its GCS's HOST:PORT or ray://HOST:10001)")


def _grpc_answers(target: str, deadline_s: float) -> bool | None:
    """True when a gRPC server answered the probe (with any status but unavailable), False
    when the server speaks no gRPC, None when it gave no answer in time."""
    import grpc

    channel = grpc.insecure_channel(target)
    try:
        channel.unary_unary(PROBE_METHOD)(b"", timeout=deadline_s)
    except grpc.RpcError as error:
        code = error.code() if isinstance(error, grpc.Call) else None
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return None
        if code == grpc.StatusCode.UNAVAILABLE:
            return False
    finally:
        channel.close()
    return True
