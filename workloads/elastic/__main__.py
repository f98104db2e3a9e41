"""`python -m workloads.elastic -f train.py -m 4 -- SCRIPT_ARGS` (see --help)."""

from __future__ import annotations

import sys

from vocab.errors import UserError
from workloads.common.options import fail
from workloads.common.ray_session import ray_session
from workloads.elastic.options import ELASTIC_SPEC, ElasticOptions, split_command_line
from workloads.elastic.script import check_script


def run(options: ElasticOptions) -> int:
    try:
        options.check_files()
        check_script(options.script_path(), options.function, options.torchft)
    except UserError as error:
        return fail(error)
    from workloads.elastic.experiment import run_experiment

    with ray_session():
        summary = run_experiment(options, lambda line: print(line, flush=True))
    if summary["error"]:
        print(f"elastic: training failed: {summary['error']}", file=sys.stderr, flush=True)
    return 0 if summary["completed"] else 1


def main(argv: list[str] | None = None) -> int:
    return ELASTIC_SPEC.main(split_command_line(sys.argv[1:] if argv is None else argv), run)


if __name__ == "__main__":
    sys.exit(main())
