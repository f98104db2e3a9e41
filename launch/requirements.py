"""A workload's Python requirements for a Ray Job's `runtime_env`: the third-party
distributions its code imports (followed through the project's own modules), each pinned to
the version installed here. Derived every time, never typed: a new import is a new pin."""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import PackageNotFoundError, packages_distributions, version
from pathlib import Path
from typing import NoReturn

from workloads.common.input_files import read_input_text
from workloads.common.options import OptionError
from workloads.common.user_code import imported_names

# Already on every Ray node at the cluster's pinned version: never reinstalled by a job.
ON_THE_CLUSTER = frozenset({"ray"})
FLAG = "--requirements"


def _source(root: Path, module: str) -> tuple[Path, bool] | None:
    """The file of a project module and whether it is a package (None: a name, not a file)."""
    base = root.joinpath(*module.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py", True
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py"), False
    return None


def imported_modules(root: Path, module: str, project_packages: tuple[str, ...]) -> set[str]:
    """Top-level names of everything `module` (under `root`) imports, following imports of
    the project's own packages transitively (a package brings all of its modules); read from
    the sources, nothing is imported."""
    seen: set[str] = set()
    found: set[str] = set()
    pending = [module]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        located = _source(root, name)
        if located is None:  # `from package.module import name`: a name, not a module
            continue
        source, is_package = located
        if is_package:
            pending += [f"{name}.{path.stem}" for path in source.parent.glob("*.py")]
        for target in imported_names(ast.parse(source.read_text(), str(source))):
            top = target.split(".")[0]
            if top in project_packages:
                pending.append(target)
            else:
                found.add(top)
    return found


def pinned_requirements(root: Path, module: str, project_packages: tuple[str, ...]) -> list[str]:
    """`["numpy==X", ...]`: the distributions providing `module`'s third-party imports, at
    their installed versions, sorted; the standard library and Ray itself left out."""
    providers = packages_distributions()
    # the project itself travels as the job's working_dir, never as a requirement
    own = {name for package in project_packages for name in providers.get(package, [])}
    pins: set[str] = set()
    for top in imported_modules(root, module, project_packages):
        if top in sys.stdlib_module_names or top == "__future__":
            continue
        for distribution in providers.get(top, []):
            if distribution.lower() not in ON_THE_CLUSTER and distribution not in own:
                pins.add(f"{distribution}=={version(distribution)}")
    return sorted(pins, key=str.lower)


# --- the user's own requirements (--requirements FILE) ---------------------------------------


MAX_REQUIREMENTS_BYTES = 1 << 20
REQUIREMENT_FORM = "name[extras] specifier ; marker"
"""The one form a line of --requirements may take (PEP 508 without a URL); said in --help."""
_COMMENT = re.compile(r"(^|\s)#.*$")  # pip's: a `#` that starts the line or follows a space
_OPTION = re.compile(r"\s--?[A-Za-z]")  # `numpy --hash=...`: an option after a requirement
_ARCHIVE = re.compile(r"\.(whl|zip|tar|tgz|tbz|txz|tlz|tar\.(gz|bz2|xz|lz|lzma))$", re.I)


def read_requirements(path: Path) -> tuple[str, ...]:
    """The requirement lines of a pip requirements file (comments and blank lines left out),
    each one requirement of the form REQUIREMENT_FORM: no URL (`name @ url`, `git+...`), no
    local path or archive, no pip option (`-r`, `-e`, `--index-url`, `--hash`), no `${VAR}`
    (pip would expand it from the environment of whoever installs). One line naming
    --requirements, the file, the line's number and the line if not."""
    from packaging.requirements import InvalidRequirement, Requirement

    text = read_input_text(FLAG, path, max_bytes=MAX_REQUIREMENTS_BYTES)
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", raw).strip()
        if not line:
            continue

        def refuse(why: str, shown: str = raw.strip(), number: int = number) -> NoReturn:
            raise OptionError(FLAG, f"{path}:{number}: {shown!r}: {why}; expected "
                              f"{REQUIREMENT_FORM}, one a line")

        if line.startswith("-") or _OPTION.search(line):
            refuse("pip options are not followed")
        if "$" in line:
            refuse("environment variables are not expanded")
        if "://" in line or line.startswith((".", "/", "~")) or "\\" in line:
            refuse("URLs and local paths are not installed")
        try:
            requirement = Requirement(line)
        except InvalidRequirement as error:
            refuse(f"not a requirement ({str(error).splitlines()[0].strip()})")
        if requirement.url is not None:
            refuse("URLs and local paths are not installed")
        if "/" in requirement.name or _ARCHIVE.search(requirement.name):
            refuse("URLs and local paths are not installed")
        lines.append(line)
    return tuple(lines)


def check_installed(requirements: tuple[str, ...]) -> None:
    """Every requirement is met by this Python environment (the local lab's nodes run it):
    one line naming the first that is not, before anything starts."""
    from packaging.requirements import Requirement

    for line in requirements:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        try:
            installed = version(requirement.name)
        except PackageNotFoundError:
            raise OptionError(FLAG, f"{requirement.name} is not installed here (the local "
                              f"lab runs this environment): pip install '{line}'") from None
        if not requirement.specifier.contains(installed, prereleases=True):
            raise OptionError(FLAG, f"{requirement.name} {installed} is installed here, "
                              f"not {requirement.specifier} (the local lab runs this "
                              f"environment): pip install '{line}'")


def user_requirements(path: Path | None, local: bool) -> tuple[str, ...]:
    """The lines of --requirements; on a local target, checked installed here."""
    if path is None:
        return ()
    lines = read_requirements(path)
    if local:
        check_installed(lines)
    return lines
