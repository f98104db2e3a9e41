"""`python -m workloads.doll --help`"""

from __future__ import annotations

import sys

from workloads.common.ray_session import ray_session
from workloads.doll.config import from_args
from workloads.doll.experiment import run_experiment
from workloads.doll.trace import TraceError, load_trace


def main(argv: list[str] | None = None) -> int:
    try:
        config = from_args(argv)
        load_trace(config.trace, config.zone, config.product)
    except (ValueError, TraceError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    with ray_session():
        run_experiment(config, lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
