"""`--requirements FILE`: the user's own pip requirement lines, one option spec for every
task that takes a user's file; installed with the job's own pinned requirements on a
cluster, checked installed here for the local lab before anything starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from launch import targets
from launch.burst import stack_run
from launch.options import REQUIREMENTS_SPEC
from launch.requirements import check_installed, read_requirements, user_requirements
from launch.targets import Remote, run_remote
from launch.workload import WorkloadRun
from netem.profile import load_profile
from tests.helpers.acceptance import PROJECT_DIR
from workloads.burst.options import BurstOptions
from workloads.common.options import OptionError

EXAMPLES = PROJECT_DIR / "examples"
MISSING = "surely-not-installed-spotburst-pkg"


def requirements_file(folder: Path, text: str) -> Path:
    path = folder / "requirements.txt"
    path.write_text(text)
    return path


def test_requirement_lines_are_read_without_comments(tmp_path: Path) -> None:
    path = requirements_file(tmp_path, "# ours\nnumpy>=1.20  # arrays\n\nscipy[dev]==1.11 ; "
                             "python_version >= '3'\t# a tab before it\n  zope.interface\n")
    assert read_requirements(path) == ("numpy>=1.20", "scipy[dev]==1.11 ; python_version >= '3'",
                                       "zope.interface")


@pytest.mark.parametrize(("text", "message"), [
    ("numpy\n-r other.txt\n", "--requirements: {path}:2: '-r other.txt': pip options are not "
     "followed; expected name[extras] specifier ; marker, one a line"),
    ("numpy\nnot a requirement!\n", "--requirements: {path}:2: 'not a requirement!': not a "
     "requirement (Expected semicolon"),
    ("numpy\n\tpkg @ file:///x  # ours\n", "--requirements: {path}:2: 'pkg @ file:///x  # ours':"
     " URLs and local paths are not installed; expected name[extras] specifier ; marker"),
])
def test_a_bad_line_is_named_with_its_number(tmp_path: Path, text: str, message: str) -> None:
    path = requirements_file(tmp_path, text)
    with pytest.raises(OptionError) as error:
        read_requirements(path)
    assert str(error.value).startswith(message.format(path=path))


def test_a_missing_file_is_named() -> None:
    with pytest.raises(ValueError, match="--requirements: .*no-such.txt"):
        user_requirements(Path("no-such.txt"), local=False)


def test_the_local_lab_needs_each_requirement_installed_here() -> None:
    check_installed(("numpy", "pillow>=1", f"{MISSING} ; python_version < '3'"))  # met, or not
    with pytest.raises(OptionError) as error:  # here
        check_installed(("numpy", MISSING))
    assert str(error.value) == (f"--requirements: {MISSING} is not installed here (the local "
                                f"lab runs this environment): pip install '{MISSING}'")
    with pytest.raises(OptionError, match=r"--requirements: numpy \S+ is installed here, not "
                                          r"<1 .*pip install 'numpy<1'"):
        check_installed(("numpy<1",))


@pytest.mark.subprocess  # git, for the job's provenance
def test_a_cluster_installs_them_with_the_workloads_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    submitted: dict[str, Any] = {}

    def fake_run_job(address: str, folder: Path, command: list[str], env: dict[str, str],
                     show: Any, requirements: list[str] | None = None, **_: Any) -> str:
        submitted.update(requirements=requirements, files=sorted(
            p.relative_to(folder).as_posix() for p in (folder / "inputs").rglob("*.py")))
        raise targets.RunFailed("stop here")

    monkeypatch.setattr(targets, "run_job", fake_run_job)
    run = WorkloadRun(name="doll", module="workloads.doll", requirements=(MISSING + "==1.0",),
                      inputs={"--policy": EXAMPLES / "burst" / "word_stats.py"})
    with pytest.raises(targets.RunFailed):
        run_remote(run, Remote(address="http://127.0.0.1:1", label="address:x"),
                   tmp_path / "out", lambda line: None)
    requirements = submitted["requirements"]
    assert requirements[-1] == MISSING + "==1.0"  # the user's, after ours
    assert any(pin.startswith("numpy==") for pin in requirements)  # the workload's own, pinned
    assert submitted["files"] == ["inputs/0/word_stats.py"]


def test_a_stack_burst_run_ships_the_task_file_its_inputs_and_requirements() -> None:
    options = BurstOptions(script=EXAMPLES / "burst" / "word_stats.py",
                           inputs=EXAMPLES / "burst" / "texts")
    run = stack_run(options, load_profile(bw=30), "bucket", 31.0, ("scipy==1.11",))
    assert run.inputs["--script"] == options.script
    assert run.inputs["--inputs"] == options.inputs  # the folder travels whole
    assert run.requirements == ("scipy==1.11",)
    assert "--function" not in run.args  # the default, process


def test_one_spec_gives_the_flag_to_every_task_that_takes_a_users_file() -> None:
    import inspect

    import tasks

    # the specs the task's flags come from (its help dict is emptied by Invoke's parser
    # once a command line has been parsed in this process)
    for name in ("run_elastic", "run_burst", "sweep_burst", "run_rl", "run_doll"):
        specs = inspect.getclosurevars(getattr(tasks, name).body).nonlocals["specs"]
        assert REQUIREMENTS_SPEC in specs, name


@pytest.mark.subprocess
def test_a_missing_package_is_one_line_before_any_lab_starts(tmp_path: Path) -> None:
    path = requirements_file(tmp_path, f"{MISSING}>=2\n")
    for command in (
        ["run-burst", "-f", "examples/burst/word_stats.py", "--inputs", "examples/burst/texts"],
        ["run-rl", "--env", "examples/rl/reach.py:Reach"],
        ["run-elastic"],
        ["run-doll"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "invoke", *command, "--requirements", str(path), "--out",
             str(tmp_path / "never")],
            cwd=PROJECT_DIR, capture_output=True, text=True, timeout=300,
        )
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr == (f"error: --requirements: {MISSING} is not installed here (the "
                               f"local lab runs this environment): pip install "
                               f"'{MISSING}>=2'\n"), command
    assert not (tmp_path / "never").exists()
