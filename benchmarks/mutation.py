"""Mutation testing of the modules users trust for numbers and safety (mutmut, one module at a
time, one job at a time): `python -m benchmarks.mutation [--module NAME ...] [--jobs N]`.

mutmut copies the packages into mutants/ (configured in pyproject.toml, [tool.mutmut]), plants
one-line bugs in the module and runs only the fast unit tests that reach each changed function.
Prints killed/total per module and exits 1 when a module is under the target. Survivors judged
equivalent or harmless are listed in tests/mutation-survivors.md. Not part of `invoke test`:
about 47 minutes wall-clock for all eleven modules on the shared 2-core machine (load average
about 20, mutants under `nice -n 19`, --jobs 2), half of it the security policy.

Last measured (killed/total, mutmut 3.8.1, after the fresh-loop fix of the harness):
doll-allocation 184/190, doll-estimation 21/21, doll-billing 39/41, burst-bound 88/92,
burst-policy 150/151, netem-profile 300/300, netem-tc 164/164, iam-documents 199/199,
bucket 164/164, costs 350/356, security-policy 633/640.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
TARGET = 0.90
# Statuses that mean the tests noticed the planted bug.
DETECTED = {"killed", "timeout", "caught by type check", "segfault"}

# name -> (the module's path, the fast tests that cover it: only these run for its mutants).
# A path may name alternatives "a|b": whichever file exists is mutated.
DOLL_TESTS = ("tests/workloads/test_doll_allocation.py", "tests/workloads/test_doll_billing.py")
PROFILE_TESTS = ("tests/netem/test_profile.py", "tests/netem/test_tc.py")
MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "doll-allocation": ("workloads/doll/allocation.py", DOLL_TESTS),
    "doll-estimation": ("workloads/doll/estimation.py", DOLL_TESTS),
    "doll-billing": ("workloads/common/billing.py", DOLL_TESTS),
    "burst-bound": ("workloads/burst/bound.py", ("tests/workloads/test_burst_bound.py",)),
    "burst-policy": (
        "workloads/burst/scheduling/policy.py",
        ("tests/workloads/test_burst_policy.py",),
    ),
    "netem-profile": ("netem/profile.py", PROFILE_TESTS),
    "netem-tc": ("netem/tc.py", PROFILE_TESTS),
    "iam-documents": ("components/iam_documents.py", ("tests/infra/test_documents.py",)),
    "bucket": ("components/data_bucket.py", ("tests/infra/test_documents.py",)),
    "security-policy": ("tests/infra/security_policy.py", ("tests/infra/test_security_policy.py",)),
    "costs": ("stacks/costs.py", ("tests/stacks/test_costs.py",)),
}
# mutmut reads its config from pyproject.toml; the test selection is set per module here.
# mutmut forks one child per mutant from a process that already ran the tests (so the cached
# offline runs of the stack are warm). A forked child inherits the asyncio loop whose default
# executor's threads did not survive the fork: Pulumi's mocks queue their calls there and wait
# forever, and each mutant whose tests declare resources used to end as a CPU-limit "timeout",
# counted as killed whatever it changed. A fresh loop in every child lets those tests run.
BOOTSTRAP = """
import asyncio
import os
import sys
os.register_at_fork(after_in_child=lambda: asyncio.set_event_loop(asyncio.new_event_loop()))
from mutmut.configuration import config
config().pytest_add_cli_args_test_selection = sys.argv[3:]
from mutmut.__main__ import cli
sys.argv = ["mutmut", "run", "--max-children", sys.argv[2], sys.argv[1]]
cli()
"""


def module_path(name: str) -> Path | None:
    for candidate in MODULES[name][0].split("|"):
        if (PROJECT_DIR / candidate).is_file():
            return Path(candidate)
    return None


def dotted(path: Path) -> str:
    return ".".join(path.with_suffix("").parts)


def run_module(path: Path, tests: tuple[str, ...], jobs: int) -> Counter[str]:
    """Run mutmut on one module with its tests; the status of each of its mutants."""
    prefix = dotted(path) + "."
    # mutmut keeps which tests reach which function from its last run and only adds tests it
    # has not seen: a test that changed (or another module's narrower selection) would leave
    # mutants run against the wrong tests. Collect afresh: one run of the module's tests.
    (PROJECT_DIR / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
    subprocess.run(
        [sys.executable, "-c", BOOTSTRAP, prefix + "*", str(jobs), *tests],
        cwd=PROJECT_DIR,
        check=False,
        stdout=subprocess.DEVNULL,
    )
    listing = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        cwd=PROJECT_DIR,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    statuses: Counter[str] = Counter()
    for line in listing.splitlines():
        name, _, status = line.strip().partition(": ")
        if name.startswith(prefix):
            statuses[status] += 1
    return statuses


def survivors(path: Path) -> list[str]:
    listing = subprocess.run(
        [sys.executable, "-m", "mutmut", "results"],
        cwd=PROJECT_DIR,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    prefix = dotted(path) + "."
    return [line.strip() for line in listing.splitlines() if line.strip().startswith(prefix)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", action="append", choices=sorted(MODULES),
                        help="a module to mutate (repeatable; default: all)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="mutants tested in parallel (default 1: the machine is shared)")
    parser.add_argument("--show-survivors", action="store_true",
                        help="list each surviving mutant (see them with `mutmut show NAME`)")
    args = parser.parse_args(argv)
    names = args.module or list(MODULES)
    rows = []
    started = time.monotonic()
    for index, name in enumerate(names, 1):
        path = module_path(name)
        if path is None:
            print(f"[{index}/{len(names)}] {name}: no file at {MODULES[name][0]}", flush=True)
            rows.append((name, 0, 0, 0.0))
            continue
        print(f"[{index}/{len(names)}] {name}: mutating {path} ...", flush=True)
        module_started = time.monotonic()
        statuses = run_module(path, MODULES[name][1], args.jobs)
        total = sum(statuses.values())
        detected = sum(count for status, count in statuses.items() if status in DETECTED)
        score = detected / total if total else 0.0
        others = ", ".join(f"{count} {status}" for status, count in sorted(statuses.items())
                           if status not in DETECTED)
        print(f"    {detected}/{total} killed ({score:.0%}) in "
              f"{time.monotonic() - module_started:.0f} s{'; ' + others if others else ''}",
              flush=True)
        if args.show_survivors:
            for line in survivors(path):
                print(f"      {line}")
        rows.append((name, detected, total, score))
    print(f"\n{'module':<18}{'killed':>8}{'total':>7}{'score':>7}")
    for name, detected, total, score in rows:
        flag = "" if score >= TARGET else f"  < {TARGET:.0%}"
        print(f"{name:<18}{detected:>8}{total:>7}{score:>7.0%}{flag}")
    print(f"({time.monotonic() - started:.0f} s; survivors reviewed in "
          "tests/mutation-survivors.md)")
    return 0 if all(score >= TARGET for *_, score in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
