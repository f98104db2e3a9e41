"""Errors of the libraries the tasks call (boto3), said in the project's vocabulary
(`vocab.errors`) at the one place every task ends: `tasks.py`'s task wrapper."""

from __future__ import annotations

from vocab.errors import RunFailed, UserError, one_line

CREDENTIALS_HINT = "configure AWS credentials (`aws configure` or `aws sso login`)"


def project_error(error: Exception) -> UserError | RunFailed | None:
    """`error` as a UserError or RunFailed when it is one a task can meet at its boundary
    (missing credentials, an AWS refusal, an unreachable endpoint); None for anything else,
    which is a bug and keeps its traceback."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    if isinstance(error, NoCredentialsError):
        return UserError(f"AWS: {one_line(error)}; {CREDENTIALS_HINT}")
    if isinstance(error, BotoCoreError | ClientError):
        return UserError(one_line(error))
    return None
