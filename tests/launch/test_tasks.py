"""The command line: every task and flag documented, clear failure without the Pulumi CLI."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from invoke import Task

import tasks
from tests.test_docs import ORIGINAL_AS_SEED

PROJECT_DIR = Path(__file__).resolve().parents[2]
INVOKE = [sys.executable, "-m", "invoke"]


def _tasks() -> dict[str, Task]:
    return {name: obj for name, obj in vars(tasks).items() if isinstance(obj, Task)}


def test_every_task_has_a_summary_and_help_for_every_flag() -> None:
    found = _tasks()
    assert {"plan", "preview", "up", "destroy", "outputs", "test"} <= set(found)
    for name, task in found.items():
        assert (task.__doc__ or "").strip(), f"task {name} has no docstring"
        flags = [p for p in inspect.signature(task.body).parameters if p != "c"]
        missing = [flag for flag in flags if flag not in (task.help or {})]
        assert not missing, f"task {name}: flags without help: {missing}"


def test_every_task_summary_is_one_whole_sentence_on_its_first_line() -> None:
    """`invoke --list` shows a docstring's first line: it must hold the whole first
    sentence, not stop mid-sentence where the text wraps."""
    for name, task in _tasks().items():
        first, *rest = inspect.cleandoc(task.__doc__ or "").splitlines()
        assert first.endswith("."), f"task {name}: {first!r} is not a whole sentence"
        assert not rest or not rest[0].strip(), f"task {name}: its summary goes on: {rest[0]!r}"


@pytest.mark.subprocess
def test_invoke_list_shows_every_task_with_its_whole_summary() -> None:
    listing = subprocess.run(
        [*INVOKE, "--list"], cwd=PROJECT_DIR, capture_output=True, text=True, check=True
    ).stdout
    words = " ".join(listing.split())
    for name, task in _tasks().items():
        summary = inspect.cleandoc(task.__doc__ or "").splitlines()[0]
        assert f"{name.replace('_', '-')} {summary}" in words


# The DOLL quick start installs no extras: loading the task list must not import what only
# the `train`/`rl` extras bring (torch, Ray Train's and RLlib's dependencies).
WITHOUT_EXTRAS = """
import sys
from importlib.abc import MetaPathFinder

class NotInstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"torch", "gymnasium", "fsspec"}:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, NotInstalled())
sys.argv = ["invoke", "--list"]
from invoke.main import program
program.run()
"""


@pytest.mark.subprocess
def test_the_task_list_loads_without_the_train_and_rl_extras() -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS], cwd=PROJECT_DIR,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "  run-doll " in done.stdout and "  run-elastic " in done.stdout


@pytest.mark.subprocess
def test_pulumi_tasks_without_the_cli_print_one_line_and_fail(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # nothing named pulumi on it
    for command in (["preview"], ["destroy"], ["outputs"]):
        done = subprocess.run(
            [*INVOKE, *command], cwd=PROJECT_DIR, env=env, capture_output=True, text=True
        )
        assert done.returncode != 0
        assert done.stderr.strip().count("\n") == 0, done.stderr
        assert "Pulumi CLI is not installed" in done.stderr
    # `up` without the CLI: its gate (a subprocess planning the stack offline, seconds) lists
    # each failed check and exits 2 (tests/launch/test_deploy.py::
    # test_up_with_a_failing_preflight_runs_no_pulumi_up runs that real gate), and the
    # missing CLI is one of the checks it lists (the same preflight_stack as `invoke
    # preflight`: tests/launch/test_account.py::test_invoke_preflight_exits_2_listing_each_failure)


def test_run_tasks_take_their_flags_from_the_option_specs() -> None:
    from launch.options import BURST_LAB_SPEC, BURST_RUN_SPEC, REQUIREMENTS_SPEC, TARGET_SPEC
    from workloads.burst.options import BURST_SPEC
    from workloads.doll.options import DOLL_SPEC

    found = _tasks()
    for name, specs in (
        ("run_doll", (DOLL_SPEC, TARGET_SPEC, REQUIREMENTS_SPEC)),
        ("run_burst", (BURST_SPEC, BURST_RUN_SPEC, BURST_LAB_SPEC, REQUIREMENTS_SPEC)),
    ):
        flags = [p for p in inspect.signature(found[name].body).parameters if p != "c"]
        assert flags == [o.dest for spec in specs for o in spec.user_options]
    doll_flags = inspect.signature(found["run_doll"].body).parameters
    assert {"workers", "batches", "k", "trace", "address", "stack", "out"} <= set(doll_flags)
    assert not {"target", "results_to_log", "s3_endpoint"} & set(doll_flags)  # the launcher's


@pytest.mark.subprocess
def test_bad_run_flags_print_one_line_naming_the_flag_and_exit_2(tmp_path: Path) -> None:
    for command, line in (
        (
            ["run-doll", "--workers", "abc"],
            "error: --workers: expected an integer in [1, 256], got 'abc'",
        ),
        (
            ["run-burst", "--bw", "30", "--images", "x"],
            "error: --images: expected an integer in [1, 10000], got 'x'",
        ),
        (
            ["sweep-burst", "--bw", "30,fast"],
            "error: --bw: expected a comma-separated list of numbers in [0.1, 10000], "
            "got '30,fast'",
        ),
        (
            ["run-burst", "--cloud-nodes", "9"],
            "error: --cloud-nodes: expected an integer in [1, 8], got '9'",
        ),
        (
            ["run-doll", "--address", "http://127.0.0.1:1", "--stack", "dev"],
            "error: --address: give --address or --stack, not both",
        ),
    ):
        done = subprocess.run(
            [*INVOKE, *command, "--out", str(tmp_path / "never")],
            cwd=PROJECT_DIR,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr == line + "\n", command
        assert done.stdout == ""
    assert not (tmp_path / "never").exists()


@pytest.mark.subprocess
def test_run_task_help_lists_every_flag_with_its_default() -> None:
    shown = subprocess.run(
        [*INVOKE, "--help", "run-doll"], cwd=PROJECT_DIR, capture_output=True, text=True
    ).stdout
    flags = [line.split()[0] for line in shown.splitlines() if line.startswith("  -")]
    assert "--workers=INT" in flags and "--adapt-interval=NUMBER" in flags
    assert "--trace=PATH" in flags
    assert "-k" in flags  # invoke spells a one-letter flag so; the workload takes -k and --k
    assert not [flag for flag in flags if flag.startswith("--=")], flags
    assert "(default: 16)" in shown


def test_every_flags_help_shows_the_type_of_its_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Invoke shows `=STRING` for every flag whose default is None; the specs know better."""
    program = _program()
    for attribute in _tasks():
        program.run(["invoke", attribute.replace("_", "-"), "--help"], exit=False)
        shown = capsys.readouterr().out
        assert "STRING" not in shown, (attribute, shown)
        assert not ORIGINAL_AS_SEED.search(shown), (attribute, shown)
    program.run(["invoke", "run-elastic", "--help"], exit=False)
    shown = capsys.readouterr().out
    for flag in ("-f PATH, --script=PATH", "-m INT, --max-workers=INT", "--spot=INT",
                 "--preempt-at=TEXT", "--preset={paper}", "  --verbose", "--warning=NUMBER"):
        assert flag in shown, (flag, shown)


@pytest.mark.parametrize(("argv", "line"), [
    (["run-rl", "--price-on-demand", "0.3"],
     "error: --price-on-demand: was renamed: use --on-demand-price"),
    (["run-rl", "--price-spot=0.1"], "error: --price-spot: was renamed: use --spot-price"),
    (["run-inference", "--rebalance", "2"],
     "error: --rebalance: was renamed: use --fair-share-period"),
    (["infer-up", "--rebalance", "2"],
     "error: --rebalance: was renamed: use --fair-share-period"),
])
def test_a_renamed_flag_is_refused_with_its_new_name(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as ended:
        _program().run(["invoke", *argv])
    assert ended.value.code == 2
    assert capsys.readouterr() == ("", line + "\n")


def test_the_workloads_own_command_line_refuses_a_renamed_flag_too() -> None:
    from workloads.common.options import OptionError
    from workloads.inference.options import INFERENCE_SPEC
    from workloads.rl.options import RL_SPEC

    with pytest.raises(OptionError, match=r"^--price-on-demand: was renamed: use "
                                          r"--on-demand-price$"):
        RL_SPEC.parse(["--price-on-demand", "0.3"])
    with pytest.raises(OptionError, match=r"^--rebalance: was renamed: use --fair-share-period$"):
        INFERENCE_SPEC.parse(["--rebalance=2"])
    assert RL_SPEC.parse(["--on-demand-price", "0.3"]).on_demand_price == 0.3


def test_a_pool_is_named_by_its_aws_name_or_its_config_key() -> None:
    from launch.preempt import PREEMPT_SPEC

    assert PREEMPT_SPEC.from_text({"pool": "spotCpu"}).pool == "spot-cpu"
    assert PREEMPT_SPEC.from_text({"pool": "spot-gpu"}).pool == "spot-gpu"


def test_invoke_test_without_root_says_so_in_one_line_before_it_runs_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from invoke import Context

    from netem.lab import netns

    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    ran: list[str] = []
    monkeypatch.setattr(Context, "run", lambda self, command, **kw: ran.append(command))
    with pytest.raises(SystemExit) as ended:
        _program_that_runs().run(["invoke", "test"])
    assert ended.value.code == 2 and ran == []
    shown = capsys.readouterr()
    assert shown.out == "" and shown.err.count("\n") == 1, shown.err
    assert shown.err.startswith("error: invoke test runs the two-site lab's tests, which need "
                                "root and network namespaces (not root): run it as root")
    _program_that_runs().run(["invoke", "test", "--quick"], exit=False)
    assert len(ran) == 2  # --quick needs no root: ruff, then the quick tests


def _program_that_runs() -> Any:
    from invoke import Collection, Program

    return Program(namespace=Collection.from_module(tasks), binary="invoke")


def _program() -> Any:
    """Invoke's program over the project's tasks, as `invoke` runs it, except that it fails
    the test instead of running a task."""
    from invoke import Collection, Executor, Program

    class NeverRuns(Executor):
        def execute(self, *tasks: Any) -> Any:
            raise AssertionError(f"a task ran: {tasks}")

    return Program(namespace=Collection.from_module(tasks), binary="invoke",
                   executor_class=NeverRuns)


def test_help_after_any_task_prints_its_help_and_runs_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    program = _program()
    for attribute, task_object in _tasks().items():
        name = attribute.replace("_", "-")
        for flag in ("--help", "-h"):
            program.run(["invoke", name, flag], exit=False)
            shown = capsys.readouterr()
            assert shown.out.startswith(f"Usage: invoke [--core-opts] {name} "), (name, flag)
            assert shown.err == "", (name, flag, shown.err)
        if task_object.positional:  # with some positional arguments given
            program.run(["invoke", name, "x", "--help"], exit=False)
            assert capsys.readouterr().out.startswith(f"Usage: invoke [--core-opts] {name} ")


@pytest.mark.parametrize(("argv", "line"), [
    (["run-doll", "--wrokers", "4"],
     "error: No idea what '--wrokers' is! (`invoke --help run-doll` lists its flags)"),
    (["run-doll", "--adapt-interval"],
     "error: --adapt-interval: needs a value (`invoke --help run-doll` lists its flags)"),
    (["run-elastic", "-f"],
     "error: --script: needs a value (`invoke --help run-elastic` lists its flags)"),
    (["files-get", "a.txt"], "error: 'files-get' did not receive required positional "
     "arguments: 'local' (`invoke --help files-get` lists its flags)"),
    (["run-dol"], "error: No idea what 'run-dol' is! (`invoke --list` shows the tasks)"),
])
def test_a_command_line_invoke_cannot_parse_is_one_line_and_exit_2(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as ended:
        _program().run(["invoke", *argv])
    assert ended.value.code == 2
    shown = capsys.readouterr()
    assert (shown.out, shown.err) == ("", line + "\n")


@pytest.mark.parametrize("partial", ["--wor", "--adapt-interval", "-"])
def test_tab_completion_keeps_invokes_own_parsing(
    partial: str, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as ended:
        _program().run(["invoke", "--complete", "--", "invoke", "run-doll", partial])
    assert ended.value.code == 0
    assert capsys.readouterr().err == ""


@pytest.mark.subprocess
def test_help_and_a_misspelled_flag_after_a_task_as_users_type_them() -> None:
    shown = subprocess.run([*INVOKE, "files-get", "--help"], cwd=PROJECT_DIR,
                           capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert "Get a file from the service's file store" in shown.stdout
    assert "--name" in shown.stdout and "--local" in shown.stdout
    misspelled = subprocess.run([*INVOKE, "files-get", "a", "b", "--nmae"], cwd=PROJECT_DIR,
                                capture_output=True, text=True)
    assert (misspelled.returncode, misspelled.stderr) == (
        2, "error: No idea what '--nmae' is! (`invoke --help files-get` lists its flags)\n")
