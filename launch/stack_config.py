"""A stack's raw config, read from `Pulumi.<stack>.yaml` as the Pulumi engine would hand it to
the program. Plain YAML only (safe loading: no tag builds a Python object; no anchors or
aliases, so no alias bomb; no key twice; at most MAX_DEPTH levels deep); no Pulumi import,
nothing patched (`invoke up` reads it). A file that is not such YAML, or whose `config` is
not a mapping of keys, is one ConfigError naming the file (and the key, where there is one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from stacks.fields import ConfigError

PROJECT_DIR = Path(__file__).resolve().parent.parent
MAX_DEPTH = 32
MAX_CONFIG_BYTES = 1 << 20


class _Refused(yaml.MarkedYAMLError):
    """Plain YAML the stack config does not take (an alias, a key twice, too deep)."""


class _PlainLoader(yaml.SafeLoader):
    """SafeLoader without anchors and aliases (`&a` / `*a`: an alias bomb expands a few
    lines into billions of values), duplicate keys (YAML keeps the last silently) or nesting
    deeper than MAX_DEPTH (the composer recurses)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _Refused(problem="anchors and aliases (& and *) are not allowed; write each "
                           "value out", problem_mark=event.start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(problem=f"nested deeper than {MAX_DEPTH} levels",
                               problem_mark=event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if isinstance(key, str) and key in seen:
                raise _Refused(problem=f"{key} is given twice", problem_mark=key_node.start_mark)
            seen.add(key if isinstance(key, str) else id(key_node))
        return super().construct_mapping(node, deep=deep)


class StackConfigMissing(ConfigError, FileNotFoundError):
    """The stack has no config file."""


def stack_config_file(stack: str) -> Path:
    return PROJECT_DIR / f"Pulumi.{stack}.yaml"


def read_stack_config(stack: str) -> dict[str, str]:
    """`Pulumi.<stack>.yaml` as the raw config the Pulumi engine hands the program."""
    path = stack_config_file(stack)
    if not path.exists():
        raise StackConfigMissing(f"no config for stack {stack!r}: {path} does not exist")
    return read_config_file(path)


def read_config_file(path: Path) -> dict[str, str]:
    """The `config:` mapping of a stack config file: `namespace:key` -> its value, a string as
    written or the JSON of anything else (lists, objects, numbers, booleans)."""
    name = path.name
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{name}: larger than {MAX_CONFIG_BYTES >> 10} KiB; a stack "
                              f"config is a few dozen lines")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        reason = f"{error.reason} at byte {error.start}"
        raise ConfigError(f"{name}: not UTF-8 text ({reason})") from None
    except OSError as error:
        raise ConfigError(f"{name}: cannot be read ({error.strerror})") from None
    try:
        document = yaml.load(text, Loader=_PlainLoader)  # noqa: S506 - a SafeLoader
    except _Refused as error:
        mark = error.problem_mark
        where = f"{name} line {_at(mark)}" if mark is not None else name
        raise ConfigError(f"{where}: {error.problem}") from None
    except yaml.MarkedYAMLError as error:
        raise ConfigError(_yaml_error(name, text, error)) from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{name}: not valid YAML: {' '.join(str(error).split())}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(
            f"{name}: {_kind(document)} at the top is not allowed; expected a mapping with a "
            "`config:` key"
        )
    values = document.get("config")
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ConfigError(
            f"{name}: config: {_kind(values)} is not allowed; expected a mapping of keys such "
            "as `spotburst:experiments: [doll]`"
        )
    for key in values:
        if not isinstance(key, str):
            raise ConfigError(
                f"{name}: config key {key!r} is not allowed; expected a name such as "
                "spotburst:experiments"
            )
    return {
        key: value if isinstance(value, str) else json.dumps(value, default=str)
        for key, value in values.items()
    }


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    return repr(value) if isinstance(value, int | float | bool) else type(value).__name__


def _yaml_error(name: str, text: str, error: yaml.MarkedYAMLError) -> str:
    """One line: the file, where (line and column; for a forbidden tag, the key), what."""
    mark = error.problem_mark or error.context_mark
    if mark is None:
        return f"{name}: not valid YAML: {' '.join(str(error).split())}"
    where = f"{name} line {_at(mark)}"
    if isinstance(error, yaml.constructor.ConstructorError):
        key = _key_at(text, mark.index)
        tag = (error.problem or "").rsplit("tag ", 1)[-1].strip("'")
        tag = tag.replace("tag:yaml.org,2002:", "!!")
        return (
            f"{where}: {key + ': ' if key else ''}the tag {tag} is not allowed; plain YAML "
            "values only (strings, numbers, booleans, lists, mappings)"
        )
    context = ""
    if error.context and error.context_mark is not None and error.context_mark is not mark:
        context = f" ({error.context} from line {_at(error.context_mark)})"
    return f"{where}: not valid YAML: {error.problem or error.context}{context}"


def _at(mark: yaml.Mark) -> str:
    return f"{mark.line + 1}, column {mark.column + 1}"


def _key_at(text: str, index: int) -> str | None:
    """The config key (`spotburst:doll.workerGroups[0].cpu`) whose value holds `index`."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    path: list[str] = []
    node = root
    while isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        if isinstance(node, yaml.MappingNode):
            children = [(str(key.value), value) for key, value in node.value]
        else:
            children = [(f"[{i}]", value) for i, value in enumerate(node.value)]
        found = [
            (label, value)
            for label, value in children
            if value.start_mark.index <= index <= value.end_mark.index
        ]
        if not found:
            break
        label, node = found[0]
        path.append(label)
    if path[:1] == ["config"]:
        path = path[1:]
    if not path:
        return None
    return path[0] + "".join(part if part.startswith("[") else f".{part}" for part in path[1:])
