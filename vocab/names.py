"""Names that become part of a path, and the one check that a path we remove is ours.

A lab id, a stored file's or a job's name is a NAME: 1-64 letters, digits, '.', '_' or '-',
starting with a letter or digit. So it is one plain file name: never absolute, never `..`,
never a folder separator, never longer than a file system allows. It is checked at the edge
(the option spec: `option(..., pattern=NAME)`), and whatever reads a name back from a file
(a lab's state record) checks it again before using it.

A delete never trusts a path it reads back: `owned(path, expected)` refuses any path but
the one the project itself made for that name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class NamePattern:
    regex: re.Pattern[str]
    max_chars: int
    rule: str
    """The pattern in words, as `--help` and an error say it."""

    def matches(self, value: object) -> bool:
        return (isinstance(value, str) and len(value) <= self.max_chars
                and self.regex.fullmatch(value) is not None)


NAME = NamePattern(
    regex=re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*"),
    max_chars=64,
    rule="a name of 1-64 letters, digits, '.', '_' or '-' starting with a letter or digit",
)


def shown(value: object) -> str:
    """`value` for an error line, cut short when it is long."""
    if isinstance(value, str) and len(value) > 40:
        return f"{value[:40]!r}... ({len(value)} characters)"
    return repr(value)


class NotOurs(ValueError):
    """A path read back from a record is not the one the project made for it."""


def owned(path: str | Path, expected: Path) -> Path:
    """`path` when it is exactly `expected` (both resolved: no symlink or `..` leads
    elsewhere) and `expected` itself is not a link; else NotOurs. Every removal of a folder
    or file named in a record goes through this."""
    given = Path(path)
    if not given.is_absolute() or given.resolve() != expected.resolve() \
            or expected.is_symlink() or Path(path) != expected:
        raise NotOurs(f"{str(path)!r} is not {str(expected)!r}, the path made for it: "
                      f"left alone")
    return expected


NAME_MAX_BYTES = 255
PATH_MAX_BYTES = 4096
"""Linux's limits on one part of a path and on a whole path (NAME_MAX, PATH_MAX)."""


def fits_file_system(path: str | Path) -> bool:
    """No part of `path` longer than a file name may be, the whole no longer than a path."""
    text = str(path)
    try:
        encoded = text.encode()
    except UnicodeEncodeError:
        return False
    return (len(encoded) < PATH_MAX_BYTES and "\0" not in text
            and all(len(part.encode()) <= NAME_MAX_BYTES for part in Path(text).parts))
