"""`invoke TASK --help` also for the tasks that take positional arguments.

Invoke's parser hands a task's next token to a positional argument it still misses before
it looks for the core flags, so `invoke files-get --help` made `--help` the file's name and
then failed on the argument still missing. `allow_help_before_positionals` makes `--help`
and `-h` the core help flag there too (as after any other task), and a context whose help
was asked for is not refused for the arguments it lacks: Invoke prints the task's help and
runs nothing. Invoke 3.0's `ParseMachine.handle` and `complete_context` are wrapped, not
replaced; `tests/launch/test_tasks.py` runs `--help` after every task, so a change of
Invoke's parser that undoes this fails there.
"""

from __future__ import annotations

from typing import Any

from invoke.parser.parser import ParseMachine

HELP_FLAGS = ("--help", "-h")


def allow_help_before_positionals() -> None:
    if getattr(ParseMachine, "_help_before_positionals", False):
        return
    handle, complete_context = ParseMachine.handle, ParseMachine.complete_context

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
        if self.context is not None and self.context is getattr(self, "help_asked_in", None):
            if self.context not in self.result:
                self.result.append(self.context)
            return
        complete_context(self)

    ParseMachine.handle = handle_help_first  # type: ignore[method-assign]
    ParseMachine.complete_context = complete_unless_help  # type: ignore[method-assign]
    ParseMachine._help_before_positionals = True  # type: ignore[attr-defined]
