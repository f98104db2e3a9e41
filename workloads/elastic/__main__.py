"""`python -m workloads.elastic -f train.py -m 4 -- SCRIPT_ARGS` (see --help)."""

from __future__ import annotations

import sys

from workloads.common.options import OptionError, fail
from workloads.elastic.entry import ScriptError
from workloads.elastic.options import ELASTIC_SPEC, ElasticOptions, split_command_line


def run(options: ElasticOptions) -> int:
    try:
        options.check_files()
        from workloads.elastic.entry import check_script

        check_script(options.script_path())
    except (OptionError, ScriptError) as error:
        return fail(error)
    from workloads.elastic.runner import run_elastic

    summary = run_elastic(options, lambda line: print(line, flush=True))
    return 0 if summary["completed"] else 1


def main(argv: list[str] | None = None) -> int:
    return ELASTIC_SPEC.main(split_command_line(sys.argv[1:] if argv is None else argv), run)


if __name__ == "__main__":
    sys.exit(main())
