"""`python -m workloads.burst --help`"""

from __future__ import annotations

import os
import sys

from workloads.burst.config import from_args
from workloads.burst.experiment import run_experiment
from workloads.common.ray_session import ray_session

FORWARDED_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")


def worker_env() -> dict[str, str]:
    """A local S3's credentials, which the cluster's nodes do not have, go to every task."""
    return {key: os.environ[key] for key in FORWARDED_ENV if key in os.environ}


def main(argv: list[str] | None = None) -> int:
    try:
        config = from_args(argv)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    env = worker_env() if config.s3_endpoint else {}
    with ray_session(runtime_env={"env_vars": env} if env else None):
        run_experiment(config, lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
