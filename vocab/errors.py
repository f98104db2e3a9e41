"""The project's two kinds of error, so every task ends a failure the same way.

- `UserError`: something the user is to fix (a flag, a file, a config key, a target that does
  not answer). Its message is one line that names the flag, key or file; the task prints
  `error: <message>` and exits 2, before anything is started or after what it started is
  removed.
- `RunFailed`: a run that started and failed (a lab that did not come up, a job that
  failed, a teardown that left something). One line, exit 1; details are in the run's log,
  which the message names.

Every error class of the project derives from one of them (and may keep a built-in base
such as ValueError for callers that catch that); `tasks.py` catches only these two.
"""

from __future__ import annotations


class UserError(Exception):
    """The user's to fix: one line naming the flag, key or file; exit code 2."""

    exit_code = 2


class RunFailed(Exception):
    """A run that started and failed: one line saying why (and where its log is); exit 1."""

    exit_code = 1


def one_line(error: BaseException, limit: int | None = None) -> str:
    """The error's message on one line (whitespace runs folded); past `limit` characters its
    start and its end, where a traceback names the exception that ended it."""
    line = " ".join(str(error).split()) or type(error).__name__
    if limit is None or len(line) <= limit:
        return line
    head = limit // 3
    return f"{line[:head]} … {line[-(limit - head - 3):]}"


FAILED_PREFIX = "run failed: "
"""How a workload's driver says, in one line of its log, why its run failed (the user's code
raised on an input, ...): the launcher ends the task with that line."""
