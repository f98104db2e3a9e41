"""`python -m workloads.inference --help`"""

from __future__ import annotations

import sys

from vocab.errors import UserError, one_line
from workloads.common.ray_session import ray_session
from workloads.inference.experiment import run_experiment
from workloads.inference.options import INFERENCE_SPEC, InferenceOptions


def run(options: InferenceOptions) -> int:
    with ray_session():
        try:
            summary = run_experiment(options, lambda line: print(line, flush=True))
        except UserError as error:  # a store the cluster cannot share, a refused command
            print(f"error: {one_line(error)}", file=sys.stderr, flush=True)
            return 2
    return 0 if summary["exactly_once"]["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    return INFERENCE_SPEC.main(argv, run)


if __name__ == "__main__":
    sys.exit(main())
