"""Declarative command-line options: one spec per workload, every command line made from it.

A workload declares its options ONCE, as a frozen keyword-only dataclass whose fields are
made with `option(...)`; the field's annotation is the option's type:

    @dataclass(frozen=True, kw_only=True)
    class ElasticOptions:
        workers: int = option(4, "number of Ray Train workers", minimum=1)
        mode: str = option("spot", "where workers run", choices=("spot", "on-demand"))
        policies: tuple[str, ...] = option(("a", "b"), "policies to run", choices=("a", "b"))
        trace: Path = option(DEFAULT_TRACE, "input file (travels with a remote run)")
        out: str | None = option(None, "results folder", launcher=True)

        def __post_init__(self) -> None:
            check_fields(self)  # every field's type, bounds and allowed values
            if self.workers > 64:  # rules across fields name the flag they blame
                raise OptionError("--workers", f"at most 64 with --mode spot, got {self.workers}")

    ELASTIC = OptionSpec(ElasticOptions, prog="python -m workloads.elastic", description="...")

Types: int, float, str (with `choices`: a choice), bool (a switch), Path, tuple[str, ...] /
tuple[int, ...] / tuple[float, ...] (a comma-separated list, never empty, no empty item, no
repeats), and
any of them `| None` (default None: not set); a path's parts fit a file system's limits.
A text that becomes part of a path takes `pattern=NAME` (vocab.names), said in `--help`.
A str that names a path on this machine (kept as text: a Path option's file travels with a
remote run, this does not) takes `path="file"` or `path="folder"`: its parts fit a file
system, and a folder is not a file, nor under one, nor the root.
Bounds: `minimum` (≥), `above` (>), `maximum` (≤). The flag is `--<field-name-with-dashes>`
unless `flag=` says otherwise. `launcher=True` marks what the launcher sets for each target
(results folder, target label, lab paths): those are flags of the workload but not of the
user's invoke task.

From the spec come:
- `spec.parser()`: the workload's argparse (`--help` lists every option, its default);
- `spec.parse(argv)`: the options object from a command line (`OptionError` if bad);
- `spec.from_text({dest: text})`: the same from an invoke task's keyword arguments;
- `spec.task_flags()`: the invoke task's parameters and help (see tasks.py), and
  `spec.task_types()` the type each one's help shows (`--workers=INT`);
- `spec.argv(options)`: the command line that gives back `options` (non-default values);
- `spec.main(argv, run)`: parse (then `complete`: rules only a workload's full command line
  can meet, such as values the launcher adds per target), then run; bad input is one line
  on stderr and exit code 2: `error: --workers: expected an integer ≥ 1, got 'abc'`.
A spec may name flags it renamed (`OptionSpec(..., renamed={"--old": "--new"})`): the old
name is refused with one line that gives the new one, on the workload's command line and on
the invoke task (tasks.py).
A spec may carry named presets (`OptionSpec(..., presets={"paper": {"steps": 100_000}})`,
with a `preset` option whose choices are their names): `--preset paper` gives those fields
those values unless their own flags are given too.
Validation lives in the dataclass (`check_fields` in `__post_init__`), so an options object
built in code is checked exactly as one parsed from text.
"""

from __future__ import annotations

import argparse
import math
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any, Generic, Literal, NoReturn, TypeVar

from vocab.errors import UserError
from vocab.names import NamePattern, fits_file_system, shown

METADATA_KEY = "spotburst.option"
PRESET_FIELD = "preset"
"""The option that picks a named set of other options' values (`--preset paper`): flags
given beside it win; the options object, and so the provenance, holds both the name and the
values it applied."""
T = TypeVar("T")
MAX_CHOICES_WORD = 24
"""Longer choices show as CHOICE in an invoke task's help: its flag column must stay narrow."""
PATH_WORDS = "a path (each part at most 255 bytes)"
PathKind = Literal["file", "folder"]


class OptionError(UserError, ValueError):
    """A bad value, named by its flag: `--workers: expected an integer ≥ 1, got 'abc'`."""

    def __init__(self, flag: str, problem: str) -> None:
        super().__init__(f"{flag}: {problem}")
        self.flag = flag
        self.problem = problem


@dataclass(frozen=True, kw_only=True)
class OptionInfo:
    """What `option()` stores on a dataclass field."""

    help: str
    flag: str | None = None
    choices: tuple[str, ...] = ()
    aliases: Mapping[str, Any] = field(default_factory=dict)
    minimum: float | None = None
    above: float | None = None
    maximum: float | None = None
    pattern: NamePattern | None = None
    path: PathKind | None = None
    launcher: bool = False


def option(
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    choices: Iterable[str] = (),
    aliases: Mapping[str, Any] | None = None,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    pattern: NamePattern | None = None,
    path: PathKind | None = None,
    launcher: bool = False,
) -> Any:
    """A dataclass field that is also a command-line option (see the module docstring).
    `aliases` maps a word to a value (`--scheduler both` -> both schedulers)."""
    info = OptionInfo(
        help=help,
        flag=flag,
        choices=tuple(choices),
        aliases=dict(aliases or {}),
        minimum=minimum,
        above=above,
        maximum=maximum,
        pattern=pattern,
        path=path,
        launcher=launcher,
    )
    if path is not None and typing.get_args(PathKind).count(path) != 1:
        raise TypeError(f"path={path!r}: expected one of {typing.get_args(PathKind)}")
    return field(default=default, metadata={METADATA_KEY: info})


@dataclass(frozen=True, kw_only=True)
class Option:
    """One option as the spec sees it: field, flag, type and rules."""

    name: str  # the dataclass field
    flag: str  # --the-flag
    base: type  # int, float, str, bool, Path; the item type of a list
    is_list: bool
    optional: bool
    default: Any
    info: OptionInfo

    @property
    def dest(self) -> str:
        """The flag as a Python name: argparse's dest and the invoke task's parameter."""
        return self.flag.removeprefix("--").replace("-", "_")

    # --- text -> value ---------------------------------------------------------------

    def read(self, text: str) -> Any:
        """The value of `text`, or OptionError naming the flag and what was expected."""
        if text in self.info.aliases:
            return self.info.aliases[text]
        if self.is_list:
            items = [part.strip() for part in text.split(",")]
            if not all(items):  # `30,,50`, a trailing comma: a value left out, not skipped
                self.fail(repr(text))
            values = tuple(self._read_one(item, text) for item in items)
            if len(set(values)) != len(values):
                self.fail(repr(text))
            return values
        return self._read_one(text, text)

    def _read_one(self, item: str, text: str) -> Any:
        value: Any
        try:
            if self.base is int:
                value = int(item)
            elif self.base is float:
                value = float(item)
                if not math.isfinite(value):
                    raise ValueError(item)
            elif self.base is Path:
                if not item:
                    raise ValueError(item)
                value = Path(item)
            else:
                value = item
        except ValueError:
            self.fail(shown(text))
        if not self._allowed(value):
            self.fail(shown(text))
        return value

    # --- checks of a typed value -----------------------------------------------------

    def check(self, value: Any) -> None:
        if value is None and self.optional:
            return
        if self.is_list:
            if not isinstance(value, tuple) or not value or len(set(value)) != len(value):
                self.fail(repr(value))
            items: tuple[Any, ...] = value
        else:
            items = (value,)
        for item in items:
            if not self._typed(item) or not self._allowed(item):
                self.fail(shown(item) if isinstance(item, str) else str(item))
        if self.info.path == "folder" and value is not None:
            check_folder(self.flag, Path(value))

    def _typed(self, value: Any) -> bool:
        if self.base is float:
            return isinstance(value, int | float) and not isinstance(value, bool)
        if self.base is int:
            return isinstance(value, int) and not isinstance(value, bool)
        return isinstance(value, self.base)

    def _allowed(self, value: Any) -> bool:
        info = self.info
        if info.choices and value not in info.choices:
            return False
        if info.pattern is not None and not info.pattern.matches(value):
            return False
        if (self.base is Path or info.path) and not fits_file_system(value):
            return False
        if self.base in (int, float):
            if info.minimum is not None and not value >= info.minimum:
                return False
            if info.above is not None and not value > info.above:
                return False
            if info.maximum is not None and not value <= info.maximum:
                return False
        return True

    def expected(self) -> str:
        """What a good value looks like, in words."""
        noun = {int: "an integer", float: "a number", Path: PATH_WORDS, bool: "a switch"}.get(
            self.base, "a text"
        )
        info = self.info
        if info.choices:
            noun = "one of " + ", ".join(info.choices)
        if info.pattern is not None:
            noun = info.pattern.rule
        if info.path is not None:
            noun = PATH_WORDS
        bounds = _bounds(info.minimum, info.above, info.maximum)
        words = f"{noun} {bounds}".strip()
        if self.is_list:
            plural = {int: "integers", float: "numbers",
                      Path: "paths (each part at most 255 bytes)"}.get(self.base)
            words = (
                f"a comma-separated list of {plural} {bounds}".strip()
                if plural
                else f"a comma-separated list of {', '.join(info.choices) or 'texts'}"
            )
        if info.aliases:
            words += " (or " + " or ".join(info.aliases) + ")"
        return words

    def fail(self, got: str) -> NoReturn:
        raise OptionError(self.flag, f"expected {self.expected()}, got {got}")

    # --- value -> text ---------------------------------------------------------------

    def text(self, value: Any) -> str:
        """`value` as it is typed on a command line (read() gives it back)."""
        for word, meaning in self.info.aliases.items():
            if value == meaning:
                return word
        if self.is_list:
            return ",".join(_plain(item) for item in value)
        return _plain(value)

    def help_text(self) -> str:
        """The help, with the default (an unset default is explained by the help itself)."""
        if self.info.pattern is not None:
            return f"{self._help_with_default()} ({self.info.pattern.rule})"
        return self._help_with_default()

    def _help_with_default(self) -> str:
        if self.base is bool or self.default is None:
            return self.info.help
        if self.base is Path and not self.is_list:  # a shipped file: its name says enough
            return f"{self.info.help} (default: {self.default.name})"
        return f"{self.info.help} (default: {self.text(self.default)})"

    def type_word(self) -> str:
        """The value's type as an invoke task's help shows it (`--workers=INT`): INT, NUMBER,
        PATH, TEXT, the choices `{a|b}` when they are few and short (else CHOICE); a list
        adds `,...`."""
        if self.info.choices and len(self.metavar()) <= MAX_CHOICES_WORD:
            return self.metavar()
        word = "CHOICE" if self.info.choices else {
            int: "INT", float: "NUMBER", Path: "PATH"}.get(self.base, "TEXT")
        return f"{word},..." if self.is_list else word

    def metavar(self) -> str:
        if self.info.choices:
            words = (*self.info.choices, *self.info.aliases)
            return ("{%s}" if not self.is_list else "{%s},...") % "|".join(words)
        return self.dest.upper() + (",..." if self.is_list else "")


def _plain(value: Any) -> str:
    """Text of a value; a float as short as it reads back exactly (30.0 -> 30)."""
    if isinstance(value, float) and float(f"{value:g}") == value:
        return f"{value:g}"
    return str(value)


def _number(value: float) -> str:
    """A bound as written: whole numbers in full (4294967295, not 4.29497e+09)."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:g}"


def _bounds(minimum: float | None, above: float | None, maximum: float | None) -> str:
    low = (
        f"[{_number(minimum)}"
        if minimum is not None
        else f"({_number(above)}"
        if above is not None
        else None
    )
    if low is not None and maximum is not None:
        return f"in {low}, {_number(maximum)}]"
    if minimum is not None:
        return f"≥ {_number(minimum)}"
    if above is not None:
        return f"> {_number(above)}"
    if maximum is not None:
        return f"≤ {_number(maximum)}"
    return ""


def _option_of(owner: type, spec_field: Field[Any], hint: Any) -> Option:
    info = spec_field.metadata.get(METADATA_KEY)
    if not isinstance(info, OptionInfo):
        raise TypeError(f"{owner.__name__}.{spec_field.name} is not made with option()")
    if spec_field.default is MISSING:
        raise TypeError(f"{owner.__name__}.{spec_field.name} has no default")
    args = typing.get_args(hint)
    optional = isinstance(hint, types.UnionType) and type(None) in args
    if optional:
        [hint] = [arg for arg in args if arg is not type(None)]
    is_list = typing.get_origin(hint) is tuple
    base = typing.get_args(hint)[0] if is_list else hint
    if base not in (int, float, str, bool, Path) or (is_list and base is bool):
        raise TypeError(f"{owner.__name__}.{spec_field.name}: unsupported type {hint!r}")
    flag = info.flag or "--" + spec_field.name.replace("_", "-")
    return Option(
        name=spec_field.name,
        flag=flag,
        base=base,
        is_list=is_list,
        optional=optional,
        default=spec_field.default,
        info=info,
    )


_KNOWN: dict[type, tuple[Option, ...]] = {}


def options_of(cls: type) -> tuple[Option, ...]:
    """Every option of an options dataclass, in declaration order (read once per class)."""
    if cls not in _KNOWN:
        hints = typing.get_type_hints(cls)
        _KNOWN[cls] = tuple(_option_of(cls, f, hints[f.name]) for f in fields(cls))
    return _KNOWN[cls]


def check_fields(options: Any) -> None:
    """Type, bounds and allowed values of every field (call it from `__post_init__`)."""
    for spec_option in options_of(type(options)):
        spec_option.check(getattr(options, spec_option.name))


def check_folder(flag: str, path: Path) -> None:
    """`path` can be a folder written into: not a file, nor under one, nor the root."""
    if path.exists() and not path.is_dir():
        raise OptionError(flag, f"{path} is a file, not a folder")
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise OptionError(flag, f"{parent} is a file, not a folder")
    if path.resolve() == Path(path.resolve().anchor):
        raise OptionError(flag, f"{path} is the root folder; give a folder of its own")


def renamed_error(old: str, new: str) -> OptionError:
    """The one line for a flag given by a name it no longer has."""
    return OptionError(old, f"was renamed: use {new}")


class _Parser(argparse.ArgumentParser):
    """argparse that reports problems as OptionError instead of printing usage and exiting."""

    renamed: Mapping[str, str] = {}

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument ") and ": " in message:
            flags, problem = message.removeprefix("argument ").split(": ", 1)
            raise OptionError(flags.split("/")[-1], problem)
        if message.startswith("unrecognized arguments: "):
            first = message.removeprefix("unrecognized arguments: ").split()[0]
            if first.split("=")[0] in self.renamed:
                old = first.split("=")[0]
                raise renamed_error(old, self.renamed[old])
            raise OptionError(first, f"is not an option of {self.prog}")
        raise OptionError(self.prog, message)


class OptionSpec(Generic[T]):
    """Everything made from one options dataclass (see the module docstring)."""

    def __init__(
        self,
        cls: type[T],
        *,
        prog: str = "",
        description: str = "",
        complete: Callable[[T], None] | None = None,
        presets: Mapping[str, Mapping[str, Any]] | None = None,
        renamed: Mapping[str, str] | None = None,
    ) -> None:
        self.cls = cls
        self.prog = prog
        self.description = description
        self.complete = complete
        self.options = options_of(cls)
        self.by_dest = {spec_option.dest: spec_option for spec_option in self.options}
        clashing = {o.dest for o in self.options} & {"c", "help"}
        if clashing or len(self.by_dest) != len(self.options):
            raise TypeError(f"{cls.__name__}: flags clash: {sorted(clashing) or 'repeated'}")
        self.renamed = dict(renamed or {})
        flags = {o.flag for o in self.options}
        if set(self.renamed) & flags or not set(self.renamed.values()) <= flags:
            raise TypeError(f"{cls.__name__}: renamed {self.renamed} must map old flags to "
                            f"the current ones")
        self.presets = {name: dict(values) for name, values in (presets or {}).items()}
        if self.presets:
            self._check_presets()

    def _check_presets(self) -> None:
        """A spec with presets has a `preset` option whose choices are their names, and each
        preset sets existing fields to values its options accept."""
        chooser = next((o for o in self.options if o.name == PRESET_FIELD), None)
        if chooser is None or set(chooser.info.choices) != set(self.presets):
            raise TypeError(f"{self.cls.__name__}: presets {sorted(self.presets)} need a "
                            f"`{PRESET_FIELD}` option with exactly these choices")
        for name, values in self.presets.items():
            unknown = sorted(set(values) - {o.name for o in self.options if o.name != PRESET_FIELD})
            if unknown:
                raise TypeError(f"{self.cls.__name__}: preset {name!r} sets {unknown}")
            self.cls(**values, **{PRESET_FIELD: name})

    @property
    def user_options(self) -> tuple[Option, ...]:
        """The options a user gives to the invoke task (not those the launcher sets)."""
        return tuple(o for o in self.options if not o.info.launcher)

    def default(self) -> T:
        return self.cls()

    # --- text in -----------------------------------------------------------------------

    def parser(self) -> argparse.ArgumentParser:
        # no abbreviations (`--spot` is not `--spot-price`), as on the invoke tasks
        parser = _Parser(prog=self.prog or None, description=self.description,
                         allow_abbrev=False)
        parser.renamed = self.renamed
        for spec_option in self.options:
            # a one-letter name is also `-k`, as invoke spells it
            names = [f"-{spec_option.dest}"] if len(spec_option.dest) == 1 else []
            names.append(spec_option.flag)
            if spec_option.base is bool:
                parser.add_argument(*names, action="store_true", help=spec_option.help_text())
            else:
                parser.add_argument(
                    *names,
                    dest=spec_option.dest,
                    default=None,
                    metavar=spec_option.metavar(),
                    help=spec_option.help_text(),
                )
        return parser

    def parse(self, argv: list[str] | None = None) -> T:
        """The options of a command line (`--help` prints and exits 0)."""
        namespace = self.parser().parse_args(argv)
        options = self.from_text(vars(namespace))
        if self.complete is not None:
            self.complete(options)
        return options

    def from_text(self, given: Mapping[str, str | bool | None]) -> T:
        """Options from text by dest (None or False: not given, the default holds)."""
        unknown = sorted(set(given) - set(self.by_dest))
        if unknown:
            raise OptionError("--" + unknown[0].replace("_", "-"), "is not an option here")
        values: dict[str, Any] = {}
        for dest, text in given.items():
            spec_option = self.by_dest[dest]
            if text is None or text is False:
                continue
            if spec_option.base is bool:
                values[spec_option.name] = bool(text)
            else:
                values[spec_option.name] = spec_option.read(str(text))
        preset = self.presets.get(values.get(PRESET_FIELD) or "", {})
        return self.cls(**{**preset, **values})

    # --- text out ----------------------------------------------------------------------

    def argv(self, options: T, *, paths: bool = True) -> list[str]:
        """The flags that give back `options` (values that differ from the defaults);
        with `paths=False` path options are left out (see `paths_of`)."""
        argv: list[str] = []
        for spec_option, value in self._changed(options):
            if spec_option.base is Path and not paths:
                continue
            if spec_option.base is bool:
                argv += [spec_option.flag] if value else []
            else:
                argv += [spec_option.flag, spec_option.text(value)]
        return argv

    def paths_of(self, options: T) -> dict[str, Path]:
        """Flag -> local file of every path option not at its default (inputs that must
        travel with the code to a remote target)."""
        return {
            spec_option.flag: value
            for spec_option, value in self._changed(options)
            if spec_option.base is Path and not spec_option.is_list
        }

    def _changed(self, options: T) -> list[tuple[Option, Any]]:
        """The options whose value differs from what parsing would give without their flag:
        the field's default, or its preset's value when the options name a preset."""
        if not isinstance(options, self.cls):
            raise TypeError(f"expected {self.cls.__name__}, got {type(options).__name__}")
        preset = self.presets.get(getattr(options, PRESET_FIELD, None) or "", {})
        return [
            (spec_option, getattr(options, spec_option.name))
            for spec_option in self.options
            if getattr(options, spec_option.name)
            != preset.get(spec_option.name, spec_option.default)
        ]

    # --- for invoke --------------------------------------------------------------------

    def task_flags(self) -> list[tuple[str, bool, str]]:
        """(parameter name, is a switch, help) of each option the user gives."""
        return [(o.dest, o.base is bool, o.help_text()) for o in self.user_options]

    def task_types(self) -> dict[str, str]:
        """Parameter name -> the type its help shows, for each option that takes a value."""
        return {o.dest: o.type_word() for o in self.user_options if o.base is not bool}

    # --- a workload's entry point ------------------------------------------------------

    def main(self, argv: list[str] | None, run: Callable[[T], int | None]) -> int:
        """Parse `argv` then `run(options)`; bad input is one line on stderr, exit 2."""
        try:
            options = self.parse(argv)
        except OptionError as error:
            return fail(error)
        return run(options) or 0


def fail(error: Exception) -> int:
    """One line on stderr for a bad input; the exit code of a usage error."""
    print(f"error: {error}", file=sys.stderr)
    return 2
