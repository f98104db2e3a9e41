"""The one way the project makes a boto3 client: every call has a deadline.

botocore's defaults wait 60 s for a connection and 60 s for each read, retried up to 4
times (legacy mode), and a server that drips its answer restarts the read timeout with each
byte: a stand-in endpoint that accepts and never answers held `preflight` or `fetch-prices`
until Ctrl-C. Here an attempt waits at most CONNECT_TIMEOUT_S to connect, READ_TIMEOUT_S for
each read and, for the launcher's clients (every client but the results' and data's S3, whose
uploads may be large), ATTEMPT_DEADLINE_S for its whole answer; a call is tried MAX_ATTEMPTS
times in all (standard retry mode). A silent or dripping endpoint thus ends the call within
UNANSWERED_S, as botocore's `ReadTimeoutError` naming the endpoint, which
`launch.errors.project_error` turns into one line.
"""

from __future__ import annotations

from typing import Any

from workloads.common.deadline import DeadlineExceeded, call_within

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 10.0
MAX_ATTEMPTS = 2
ATTEMPT_DEADLINE_S = 12.0
RETRY_BACKOFF_S = 1.0
"""Standard mode's longest wait before a second attempt (rand(0, 1) × 1 s for throttling,
× 50 ms otherwise)."""
UNANSWERED_S = MAX_ATTEMPTS * ATTEMPT_DEADLINE_S + RETRY_BACKOFF_S
"""The longest a launcher's call waits on an endpoint that accepts and never answers, or
drips: a task that stops at such an endpoint says so in one line within 30 s."""


def client_config() -> Any:
    from botocore.config import Config

    return Config(connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S,
                  retries={"total_max_attempts": MAX_ATTEMPTS, "mode": "standard"})


def aws_client(service: str, *, region: str | None = None, endpoint_url: str | None = None,
               session: Any = None, whole_answer: bool = True) -> Any:
    """A boto3 client of `service` with the project's deadlines (see the module docstring);
    from `session` when given (a test's, say), else a fresh default session's. Without
    `whole_answer`, only the connect and read timeouts (large transfers)."""
    import boto3  # imported here so local-only runs never need AWS configuration

    made_by: Any = session or boto3.Session()
    client = made_by.client(service, region_name=region, endpoint_url=endpoint_url,
                            config=client_config())
    if whole_answer:
        client.meta.events.register("before-send", _sender_within(client, ATTEMPT_DEADLINE_S))
    return client


def _sender_within(client: Any, seconds: float) -> Any:
    """A `before-send` handler that sends the request itself, as botocore would, but gives
    up after `seconds`: botocore uses a response a handler returns instead of sending. The
    request goes through the client's own HTTP session (botocore's `_endpoint`, the one
    place its requests are sent from)."""
    from botocore.exceptions import ReadTimeoutError

    http_session = client._endpoint.http_session

    def send(request: Any, **_: Any) -> Any:
        try:
            return call_within(lambda: http_session.send(request), seconds)
        except DeadlineExceeded:
            raise ReadTimeoutError(endpoint_url=request.url) from None

    return send
