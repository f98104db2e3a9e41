"""`python -m workloads.doll --help`"""

from __future__ import annotations

import sys

from vocab.errors import UserError
from workloads.common.options import fail
from workloads.common.ray_session import ray_session
from workloads.doll.experiment import check_inputs, run_experiment
from workloads.doll.options import DOLL_SPEC, DollOptions


def run(options: DollOptions) -> int:
    try:
        check_inputs(options)
    except UserError as error:
        return fail(error)
    print("starting Ray", flush=True)
    with ray_session():
        run_experiment(options, lambda line: print(line, flush=True))
    return 0


def main(argv: list[str] | None = None) -> int:
    return DOLL_SPEC.main(argv, run)


if __name__ == "__main__":
    sys.exit(main())
