"""`python -m workloads.rl --help`"""

from __future__ import annotations

import sys

from workloads.common.options import OptionError, fail
from workloads.common.ray_session import ray_session
from workloads.rl.envs import check_env
from workloads.rl.experiment import run_experiment
from workloads.rl.options import RL_SPEC, RlOptions


def run(options: RlOptions) -> int:
    try:
        check_env(options.env, options.env_file)
    except OptionError as error:
        return fail(error)
    with ray_session():
        run_experiment(options, lambda line: print(line, flush=True))
    return 0


def main(argv: list[str] | None = None) -> int:
    return RL_SPEC.main(argv, run)


if __name__ == "__main__":
    sys.exit(main())
