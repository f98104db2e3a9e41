"""The docs show only commands that work: every `invoke` and `python -m` line in a fenced
block of README.md or docs/ is parsed by the real task list with `--help` added (an unknown
task or flag fails), every `python -m` module answers `--help` and knows each flag the line
gives, and every `invoke run-*` line is run, exactly as shown, by an acceptance test
(tests/acceptance/ holds it as a literal); links between the pages resolve; the docs speak
of the project only; the README stays a page one reads in minutes."""

from __future__ import annotations

import ast
import contextlib
import io
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from invoke import Collection, Program, Task

import tasks

PROJECT_DIR = Path(__file__).resolve().parents[1]
DOCS = [PROJECT_DIR / "README.md", *sorted((PROJECT_DIR / "docs").rglob("*.md"))]
SEPARATORS = {"&&", "||", "|", ";", "&"}
REDIRECTION = re.compile(r"\d?(>>?|<)(&\d)?")
SHELL_FENCES = {"bash", "sh", "shell", "console"}
"""Commands are shown in fences labelled so; other fences (Python, pictures) are not run."""
NOT_OURS = {"venv", "pip"}  # `python3 -m venv`, `python -m pip`: the install lines
LEAKS = re.compile(
    r"session [0-9]|/work/|done-when|helpers'|other helpers|my own (test )?runs?"
    r"|issue #?[0-9]|(?<![-\w])sessions?\b(?!\s+Manager)",  # AWS's Session Manager is a product
    re.IGNORECASE,
)


ORIGINAL_AS_SEED = re.compile(
    r"seed 0\d\d|seed's|seeds'|seed-format|seed profile|\| seed \|"
    r"|(?<!sets )(?<!from )the seed\b(?! of)",
    re.IGNORECASE,
)
"""Words for the original systems a reader cannot know ("seed 004", "the seed's scale"); a
random seed (`--seed`, "sets the seed", "drawn from the seed", "the seed of the chains")
is another matter."""


def fenced_commands(path: Path) -> list[tuple[str, list[str]]]:
    """(where, argv) of every command in the file's shell blocks: continuation lines
    joined, comments dropped, `a && b | c` split, `.venv/bin/` and `VAR=value` prefixes
    dropped."""
    found: list[tuple[str, list[str]]] = []
    fenced = shell = False
    pending, start = "", 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            shell = fenced and line.strip().removeprefix("```") in SHELL_FENCES
            continue
        if not shell:
            continue
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text, pending = pending + line, ""
        words = shlex.split(text, comments=True)
        segment: list[str] = []
        redirected = False
        for word in [*words, ";"]:
            if redirected or REDIRECTION.fullmatch(word):  # `2>&1`, `> file`: not arguments
                redirected = word in (">", ">>", "<")
                continue
            if word not in SEPARATORS:
                segment.append(word)
                continue
            while segment and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", segment[0]):
                segment.pop(0)
            if segment:
                segment[0] = segment[0].removeprefix(".venv/bin/")
                found.append((f"{path.relative_to(PROJECT_DIR)}:{start}", segment))
            segment = []
    return found


def project_commands() -> list[tuple[str, list[str]]]:
    return [
        (where, argv)
        for path in DOCS
        for where, argv in fenced_commands(path)
        if argv[0] == "invoke"
        or (argv[0] in ("python", "python3") and argv[1:2] == ["-m"]
            and argv[2].split(".")[0] not in NOT_OURS)
    ]


def run_invoke(argv: list[str]) -> tuple[int, str]:
    """`invoke ARGV` in this process with the project's task list; (exit code, output)."""
    program = Program(namespace=Collection.from_module(tasks), binary="invoke")
    output = io.StringIO()
    # invoke pops a flag's help from its task while it parses: give it back afterwards, as
    # later tests (and later commands here) read the tasks' help
    helps = {task: dict(task.help) for task in vars(tasks).values() if isinstance(task, Task)}
    try:
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            program.run(["invoke", *argv], exit=True)
    except SystemExit as leaving:
        return int(leaving.code or 0), output.getvalue()
    finally:
        for task, help_by_flag in helps.items():
            task.help = help_by_flag
    return 0, output.getvalue()


@cache
def module_help(module: str) -> str:
    done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=PROJECT_DIR,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"python -m {module} --help: {done.stderr[-800:]}"
    return done.stdout


def test_the_docs_show_commands() -> None:
    commands = project_commands()
    assert len(commands) >= 10
    assert any(argv[:2] == ["invoke", "run-doll"] for _, argv in commands)


@pytest.mark.parametrize(("where", "argv"), [
    pytest.param(where, argv, id=f"{where} {' '.join(argv)[:60]}")
    for where, argv in project_commands() if argv[0] == "invoke"
])
def test_every_invoke_command_in_the_docs_parses_with_help(where: str, argv: list[str]) -> None:
    words = argv[1:]
    cut = words.index("--") if "--" in words else len(words)
    code, output = run_invoke([*words[:cut], "--help", *words[cut:]])
    assert code == 0, f"{where}: `{shlex.join(argv)}` does not parse: {output.strip()}"


@pytest.mark.subprocess
@pytest.mark.parametrize(("where", "argv"), [
    pytest.param(where, argv, id=f"{where} {' '.join(argv)[:60]}")
    for where, argv in project_commands() if argv[0] != "invoke"
])
def test_every_python_module_command_in_the_docs_knows_its_flags(
    where: str, argv: list[str]
) -> None:
    shown = module_help(argv[2])
    unknown = [word.split("=")[0] for word in argv[3:]
               if word.startswith("--") and word.split("=")[0] not in shown]
    assert not unknown, f"{where}: `{shlex.join(argv)}`: {unknown} not in its --help"


@pytest.mark.parametrize("path", DOCS, ids=lambda path: str(path.relative_to(PROJECT_DIR)))
def test_the_docs_speak_of_the_project_only(path: Path) -> None:
    leaks = [f"{number}: {line.strip()}" for number, line in
             enumerate(path.read_text().splitlines(), 1) if LEAKS.search(line)]
    assert not leaks, f"{path.name} speaks of how it was built: {leaks[:5]}"


@pytest.mark.parametrize("path", [path for path in DOCS if "results" not in path.parts],
                         ids=lambda path: str(path.relative_to(PROJECT_DIR)))
def test_the_docs_name_the_original_works(path: Path) -> None:
    """No page calls an original work "the seed": it names the work."""
    found = [f"{number}: {line.strip()}" for number, line in
             enumerate(path.read_text().splitlines(), 1) if ORIGINAL_AS_SEED.search(line)]
    assert not found, f"{path.name} calls an original work 'the seed': {found[:5]}"


ACCEPTANCE = PROJECT_DIR / "tests" / "acceptance"
README_MAX_LINES = 200


def accepted_commands() -> set[tuple[str, ...]]:
    """The command lines the acceptance tests run: their string literals that start with
    `invoke `, split as a shell splits them."""
    found: set[tuple[str, ...]] = set()
    for path in ACCEPTANCE.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and node.value.startswith("invoke "):
                found.add(tuple(shlex.split(node.value)))
    return found


def test_every_run_command_in_the_docs_is_run_by_an_acceptance_test() -> None:
    shown = {tuple(argv): where for where, argv in project_commands()
             if argv[0] == "invoke" and argv[1].startswith("run-") and "--help" not in argv}
    assert shown, "the docs show no run command"
    untested = [f"{where}: {shlex.join(argv)}" for argv, where in shown.items()
                if argv not in accepted_commands()]
    assert not untested, f"run commands no acceptance test runs as shown: {untested}"


LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


@pytest.mark.parametrize("path", DOCS, ids=lambda path: str(path.relative_to(PROJECT_DIR)))
def test_links_between_the_pages_resolve(path: Path) -> None:
    targets = [match.group(1) for match in LINK.finditer(path.read_text())
               if "://" not in match.group(1)]
    broken = [target for target in targets if not (path.parent / target).exists()]
    assert not broken, f"{path.name} links to nothing: {broken}"


def test_the_readme_is_short() -> None:
    lines = len((PROJECT_DIR / "README.md").read_text().splitlines())
    assert lines < README_MAX_LINES, f"README.md has {lines} lines"
