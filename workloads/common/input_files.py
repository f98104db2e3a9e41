"""Reading a file the user named on a command line: checked against its real size before it is
read, and every way it can fail said in one line that names the flag and the file.

Callers give the flag (`--trace`), the path and the largest size that makes sense for what
the file holds; `InputFileError` is a UserError (one line, exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vocab.errors import UserError

MB = 1 << 20


class InputFileError(UserError, ValueError):
    """An input file that is missing, not a file, unreadable, too large or not text."""


def _where(flag: str, path: Path) -> str:
    """`--flag: path`, or the path alone for a file no flag names (a record of ours)."""
    return f"{flag}: {path}" if flag else str(path)


def read_input_bytes(flag: str, path: Path, *, max_bytes: int) -> bytes:
    """The file's bytes, once it is known to be a readable regular file of at most
    `max_bytes` (its size is read before its content)."""
    try:
        if path.is_dir():
            raise InputFileError(f"{_where(flag, path)} is a folder, not a file")
        size = path.stat().st_size
        if not path.is_file():
            raise InputFileError(f"{_where(flag, path)} is not a regular file")
        if size > max_bytes:
            raise InputFileError(f"{_where(flag, path)} holds {size / MB:.1f} MB, more than "
                                 f"the {max_bytes / MB:g} MB such a file may hold")
        return path.read_bytes()
    except FileNotFoundError:
        raise InputFileError(f"{_where(flag, path)}: no such file") from None
    except OSError as error:
        raise InputFileError(f"{_where(flag, path)} cannot be read "
                             f"({error.strerror})") from None


def read_input_text(flag: str, path: Path, *, max_bytes: int) -> str:
    """The file as UTF-8 text (see read_input_bytes)."""
    data = read_input_bytes(flag, path, max_bytes=max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputFileError(f"{_where(flag, path)} is not UTF-8 text (byte {error.start} is "
                             f"{data[error.start:error.start + 1]!r})") from None


MAX_JSON_DEPTH = 64
"""Nesting no file of the project needs more of: deeper is refused before any code walks it."""


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is not a number JSON allows")


def parse_json(where: str, text: str | bytes) -> Any:
    """A JSON document as the standard has it, or InputFileError naming `where` (a flag and a
    file, or a file): not JSON, NaN or Infinity, nested deeper than MAX_JSON_DEPTH."""
    try:
        document = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise InputFileError(f"{where} is not JSON ({error})") from None
    except UnicodeDecodeError:
        raise InputFileError(f"{where}: not UTF-8 text") from None
    except ValueError as error:  # what _no_constant raised
        raise InputFileError(f"{where}: {error}") from None
    except RecursionError:
        raise InputFileError(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels") from None
    if _depth_exceeds(document, MAX_JSON_DEPTH):
        raise InputFileError(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels")
    return document


def _depth_exceeds(document: Any, limit: int) -> bool:
    level: list[Any] = [document]
    for _ in range(limit):
        level = [child for item in level if isinstance(item, dict | list)
                 for child in (item.values() if isinstance(item, dict) else item)]
        if not level:
            return False
    return True


def read_input_json(flag: str, path: Path, *, max_bytes: int) -> Any:
    """The file's JSON document (see read_input_bytes and parse_json)."""
    return parse_json(_where(flag, path),
                      read_input_text(flag, path, max_bytes=max_bytes))
