"""`python -m workloads.doll --help`"""

from __future__ import annotations

import sys

from workloads.common.options import fail
from workloads.common.ray_session import ray_session
from workloads.common.spot_market.trace import TraceError, load_trace
from workloads.doll.experiment import run_experiment
from workloads.doll.options import DOLL_SPEC, DollOptions


def run(options: DollOptions) -> int:
    try:
        load_trace(options.trace, options.zone, options.product)
    except TraceError as error:
        return fail(error)
    print("starting Ray", flush=True)
    with ray_session():
        run_experiment(options, lambda line: print(line, flush=True))
    return 0


def main(argv: list[str] | None = None) -> int:
    return DOLL_SPEC.main(argv, run)


if __name__ == "__main__":
    sys.exit(main())
