"""`python -m workloads.burst --help`"""

from __future__ import annotations

import os
import sys

from ray.exceptions import RayTaskError

from vocab.errors import FAILED_PREFIX
from workloads.burst.experiment import data_source, run_experiment, write_inputs
from workloads.burst.options import BURST_SPEC, BurstOptions
from workloads.burst.work import TaskFunctionError
from workloads.common.options import OptionError, fail
from workloads.common.ray_session import ray_session
from workloads.common.user_code import UserCodeError

FORWARDED_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")


def worker_env() -> dict[str, str]:
    """A local S3's credentials, which the cluster's nodes do not have, go to every task."""
    return {key: os.environ[key] for key in FORWARDED_ENV if key in os.environ}


def run(options: BurstOptions) -> int:
    """The experiment; a flag that does not fit the cluster it found is one line, exit 2.
    The user's task function failing on an input ends the run: its traceback, then one line
    `error: ...` naming the input and the error (the launcher shows that line), exit 1."""
    env = worker_env() if options.s3_endpoint else {}
    if options.inputs_only:
        write_inputs(options, data_source(options), lambda line: print(line, flush=True))
        return 0
    try:
        with ray_session(runtime_env={"env_vars": env} if env else None):
            run_experiment(options, lambda line: print(line, flush=True))
    except OptionError as error:
        return fail(error)
    except RayTaskError as error:
        cause = error.cause if isinstance(error.cause, TaskFunctionError | UserCodeError) \
            else None
        if cause is None:
            raise
        print(str(error), flush=True)  # the task's traceback, the user's chained to it
        print(f"{FAILED_PREFIX}{cause}", flush=True)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    return BURST_SPEC.main(argv, run)


if __name__ == "__main__":
    sys.exit(main())
