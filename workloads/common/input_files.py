"""Reading a file the user named on a command line: checked against its real size before it is
read, and every way it can fail said in one line that names the flag and the file.

Callers give the flag (`--trace`), the path and the largest size that makes sense for what
the file holds; `InputFileError` is a UserError (one line, exit 2).
"""

from __future__ import annotations

from pathlib import Path

from vocab.errors import UserError

MB = 1 << 20


class InputFileError(UserError, ValueError):
    """An input file that is missing, not a file, unreadable, too large or not text."""


def read_input_bytes(flag: str, path: Path, *, max_bytes: int) -> bytes:
    """The file's bytes, once it is known to be a readable regular file of at most
    `max_bytes` (its size is read before its content)."""
    try:
        if path.is_dir():
            raise InputFileError(f"{flag}: {path} is a folder, not a file")
        size = path.stat().st_size
        if not path.is_file():
            raise InputFileError(f"{flag}: {path} is not a regular file")
        if size > max_bytes:
            raise InputFileError(f"{flag}: {path} holds {size / MB:.1f} MB, more than the "
                                 f"{max_bytes / MB:g} MB such a file may hold")
        return path.read_bytes()
    except FileNotFoundError:
        raise InputFileError(f"{flag}: {path}: no such file") from None
    except OSError as error:
        raise InputFileError(f"{flag}: {path} cannot be read ({error.strerror})") from None


def read_input_text(flag: str, path: Path, *, max_bytes: int) -> str:
    """The file as UTF-8 text (see read_input_bytes)."""
    data = read_input_bytes(flag, path, max_bytes=max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputFileError(f"{flag}: {path} is not UTF-8 text (byte {error.start} is "
                             f"{data[error.start:error.start + 1]!r})") from None
