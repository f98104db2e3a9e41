"""Two adaptations of Invoke's command-line parser, so every task meets bad input the way the
project's own checks do (`vocab.errors`: one line naming what was wrong, exit 2).

- `invoke TASK --help` also for the tasks that take positional arguments. Invoke's parser
  hands a task's next token to a positional argument it still misses before it looks for
  the core flags, so `invoke files-get --help` made `--help` the file's name and then failed
  on the argument still missing. Here `--help` and `-h` are the core help flag there too, as
  after any other task, and a context whose help was asked for is not refused for the
  arguments it lacks: Invoke prints the task's help and runs nothing.
- A parse error in the tasks and their flags (a misspelled flag, a flag without its value, a
  missing argument, an unknown task) ends with one line, `error: ...` and where the flags
  are listed, and exit code 2; Invoke's own is exit code 1, the code of a run that failed.
- A task's last positional arguments may be optional (`invoke data-put LOCAL [NAME]`,
  registered in OPTIONAL_POSITIONALS): Invoke requires every positional argument.
  Invoke's core flags (those before the first task) are parsed before `tasks.py` is loaded
  and keep Invoke's own handling; tab completion keeps its own too.
- A flag's help shows the type of its value (`--workers=INT`, `--mode={spot|on-demand}`),
  not Invoke's `=STRING` for every flag whose default is None: a `TypedTask` carries the
  type of each of its flags (from the option specs), and the help of a parser context shows
  it.

Invoke 3.0's `ParseMachine.handle`, `ParseMachine.complete_context`,
`ParserContext.help_for` and `Program.parse_tasks` are wrapped, not replaced;
`tests/launch/test_tasks.py` runs `--help` after every task, a misspelled flag, a renamed one
and a completion, so a change of Invoke's parser that undoes this fails there.
"""

from __future__ import annotations

import re
from typing import Any

from invoke import Exit, ParseError, Program, Task
from invoke.parser import Argument, ParserContext
from invoke.parser.parser import ParseMachine

from workloads.common.options import renamed_error

HELP_FLAGS = ("--help", "-h")
_UNKNOWN = re.compile(r"^No idea what '(--[\w-]+)' is!$")
_NEEDS_VALUE = re.compile(r"^Flag <Argument: ([\w-]+)[^>]*> needed value and was not given one!$")
USER_ERROR_EXIT_CODE = 2
INVOKE_VALUE_WORD = "STRING"


class TypedTask(Task):  # type: ignore[misc]
    """A task whose flags' help names their value's type (`value_types`: parameter -> word)."""

    value_types: dict[str, str] = {}
    renamed_flags: dict[str, str] = {}
    """Old flag -> its new name: the old one is refused with the new one in the line."""

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list[Argument]:
        arguments: list[Argument] = super().get_arguments(ignore_unknown_help)
        for argument in arguments:
            name = argument.attr_name or argument.name or ""
            argument.value_type = self.value_types.get(name)  # type: ignore[attr-defined]
        return arguments
OPTIONAL_POSITIONALS: dict[str, set[str]] = {}
"""Task name -> its positional arguments that may be left out (then their flag's default)."""


def adapt_invoke_parser() -> None:
    if getattr(ParseMachine, "_adapted_by_spotburst", False):
        return
    handle, complete_context = ParseMachine.handle, ParseMachine.complete_context
    parse_tasks = Program.parse_tasks
    help_for = ParserContext.help_for

    def handle_help_first(self: Any, token: str) -> None:
        context = self.context
        if (token in HELP_FLAGS and self.current_state != "unknown"
                and context is not None and context is not self.initial
                and context.missing_positional_args and not self.waiting_for_flag_value
                and self.initial is not None and token in self.initial.flags):
            self.initial.flags[token].value = context.name
            self.help_asked_in = context
            return
        handle(self, token)

    def complete_unless_help(self: Any) -> None:
        context = self.context
        optional = OPTIONAL_POSITIONALS.get(getattr(context, "name", None) or "", set())
        if context is not None and (context is getattr(self, "help_asked_in", None) or (
                optional and {a.name for a in context.missing_positional_args} <= optional)):
            if context not in self.result:
                self.result.append(context)
            return
        complete_context(self)

    def parse_or_exit_2(self: Any) -> None:
        try:
            parse_tasks(self)
        except ParseError as error:
            task_name = getattr(error.context, "name", None)
            unknown = _UNKNOWN.match(str(error))
            renamed = renamed_flags(self, task_name)
            if unknown and unknown.group(1) in renamed:
                old = unknown.group(1)
                raise Exit(f"error: {renamed_error(old, renamed[old])}",
                           code=USER_ERROR_EXIT_CODE) from None
            where = (f"`invoke --help {task_name}` lists its flags" if task_name
                     else "`invoke --list` shows the tasks")
            raise Exit(f"error: {readable(str(error))} ({where})",
                       code=USER_ERROR_EXIT_CODE) from None

    def help_with_types(self: Any, flag: str) -> tuple[str, str]:
        names, text = help_for(self, flag)
        word = getattr(self.flags[flag], "value_type", None)
        if word:
            names = names.replace("=" + INVOKE_VALUE_WORD, "=" + word).replace(
                " " + INVOKE_VALUE_WORD, " " + word)
        return names, text

    ParserContext.help_for = help_with_types  # type: ignore[method-assign]
    ParseMachine.handle = handle_help_first  # type: ignore[method-assign]
    ParseMachine.complete_context = complete_unless_help  # type: ignore[method-assign]
    Program.parse_tasks = parse_or_exit_2  # type: ignore[method-assign]
    ParseMachine._adapted_by_spotburst = True  # type: ignore[attr-defined]


def renamed_flags(program: Any, task_name: str | None) -> dict[str, str]:
    try:
        found = program.collection[task_name] if task_name else None
    except (KeyError, ValueError):
        return {}
    return getattr(found, "renamed_flags", {})


def readable(message: str) -> str:
    """Invoke's parse error in the words of the project's own (`--flag needs a value`)."""
    needs_value = _NEEDS_VALUE.match(message)
    if needs_value:
        return f"--{needs_value.group(1).replace('_', '-')}: needs a value"
    return message
