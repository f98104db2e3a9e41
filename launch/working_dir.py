"""The folder a Ray Job uploads as `runtime_env.working_dir`: the project's code, plus the
run's input files under `inputs/`."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory

from workloads.common.input_files import InputFileError

CODE_PACKAGES = ("workloads", "vocab", "procs", "netem", "launch")
"""What a workload may import of the project's own code (the layers it sits on), shipped as
the job's working dir: a cluster has nothing of the project installed."""
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".*")


@contextmanager
def staged_working_dir(
    project_dir: Path, inputs: dict[str, Path]
) -> Iterator[tuple[Path, dict[str, str]]]:
    """A temporary copy of the code packages and inputs (files, or folders copied whole);
    yields the folder and, per input flag, the input's path relative to it. A folder named
    `ray` would shadow the package in the job, so none is ever staged at the top."""
    with TemporaryDirectory(prefix="spotburst-job-") as folder:
        root = Path(folder)
        for package in CODE_PACKAGES:
            if (project_dir / package).is_dir():
                shutil.copytree(project_dir / package, root / package, ignore=IGNORED)
        relative: dict[str, str] = {}
        for index, (flag, path) in enumerate(sorted(inputs.items())):
            staged = Path("inputs") / str(index) / path.name
            if path.is_dir():  # a folder input (elastic's --working-dir) travels whole
                shutil.copytree(path, root / staged, ignore=IGNORED)
                relative[flag] = staged.as_posix()
                continue
            if not path.is_file():
                raise InputFileError(f"{flag}: {path}: no such file")
            (root / staged).parent.mkdir(parents=True)
            shutil.copy2(path, root / staged)
            relative[flag] = staged.as_posix()
        yield root, relative
