"""One interface for a folder of files, whether a local directory or an S3 prefix."""

from __future__ import annotations

import errno
import functools
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from vocab.errors import UserError

SCRATCH_SUFFIX = ".part"
CHUNK_BYTES = 1 << 20


class FileTooLarge(ValueError):
    """A file read with a bound holds more bytes than the bound."""


def bounded(chunks: Iterator[bytes], name: str, limit: int) -> Iterator[bytes]:
    """`chunks` as they come, FileTooLarge once they pass `limit` bytes in all."""
    seen = 0
    for chunk in chunks:
        seen += len(chunk)
        if seen > limit:
            raise FileTooLarge(f"{name}: more than the {limit} bytes read for it (changed "
                               "while it was read?)")
        yield chunk
MISSING_KEY_CODES = ("NoSuchKey", "404")
"""S3's error codes for a key that is not there: GET says NoSuchKey, HEAD (no body) 404."""


def write_atomically(path: Path, data: bytes, private: bool = False) -> None:
    """`path` holds `data` whole or its earlier content, never a part: a reader in the middle
    of the write, or a write that fails or whose process is killed, leaves the old file or
    the new one (a power loss is not covered: nothing is synced to disk). The data goes to a
    hidden scratch file beside it (`.NAME.<random>.part`; the owner's alone when `private`,
    else as the umask allows), which then replaces `path` in one rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        scratch = path.with_name(f".{path.name}.{secrets.token_hex(4)}{SCRATCH_SUFFIX}")
        try:
            descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                                 0o600 if private else 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.replace(scratch, path)
    except BaseException:
        scratch.unlink(missing_ok=True)
        raise


def is_scratch(path: Path) -> bool:
    """A scratch file of write_atomically, not (yet) a file of the folder."""
    return path.name.startswith(".") and path.name.endswith(SCRATCH_SUFFIX)


class Storage(Protocol):
    """A folder of named files (names are relative, '/'-separated)."""

    def write_bytes(self, name: str, data: bytes) -> None: ...

    def read_bytes(self, name: str) -> bytes:
        """The bytes of file `name` (FileNotFoundError if there is none)."""
        ...

    def names(self) -> list[str]: ...

    def read_chunks(self, name: str, limit: int) -> Iterator[bytes]:
        """The bytes of file `name` in pieces of at most CHUNK_BYTES, never more than `limit`
        in all (FileTooLarge once the file holds more: a file replaced by a larger one
        between a size check and the read gets no further)."""
        ...

    def size(self, name: str) -> int:
        """Bytes of file `name` (FileNotFoundError if there is none), without reading it."""
        ...

    def remove(self, name: str) -> None:
        """Remove file `name` (nothing if there is none)."""
        ...

    def remove_folder(self, name: str) -> None:
        """Remove every file under the folder `name` (nothing if there is none)."""
        ...

    @property
    def uri(self) -> str: ...


@dataclass(frozen=True)
class LocalStorage:
    """A folder. Its files are read without following symbolic links, at any depth: a link
    planted in the folder (to a secret beside it, to /proc) is refused, never read."""

    root: Path

    def write_bytes(self, name: str, data: bytes) -> None:
        write_atomically(self.root / name, data)

    def _open(self, name: str) -> int:
        """A descriptor of the plain file `name`, every part of its path walked without
        following a link (OSError naming the file when one is a link or not a plain file)."""
        parts = name.split("/")
        if any(part in ("", ".", "..") for part in parts):
            raise FileNotFoundError(f"{self.root / name}: not a plain name in the store")
        try:
            folder = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory",
                                    str(self.root / name)) from None
        try:
            for part in parts[:-1]:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                dir_fd=folder)
                os.close(folder)
                folder = inner
            descriptor = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK,
                                 dir_fd=folder)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory",
                                    str(self.root / name)) from None
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                raise OSError(error.errno, "a symbolic link: the store reads plain files "
                              "only", str(self.root / name)) from None
            raise
        finally:
            os.close(folder)
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.close(descriptor)
            raise OSError(errno.EINVAL, "not a plain file", str(self.root / name))
        return descriptor

    def read_bytes(self, name: str) -> bytes:
        with open(self._open(name), "rb") as handle:
            return handle.read()

    def read_chunks(self, name: str, limit: int) -> Iterator[bytes]:
        with open(self._open(name), "rb") as handle:
            yield from bounded(iter(lambda: handle.read(CHUNK_BYTES), b""), name, limit)

    def names(self) -> list[str]:
        """Every plain file, as it stands while the walk passes; a folder removed meanwhile
        (a dropped run's files going) is skipped, never an error."""
        found = []
        for folder, _, files in os.walk(self.root):  # os.walk skips what vanished
            for file_name in files:
                path = Path(folder, file_name)
                if not path.is_symlink() and path.is_file() and not is_scratch(path):
                    found.append(path.relative_to(self.root).as_posix())
        return sorted(found)

    def size(self, name: str) -> int:
        descriptor = self._open(name)
        try:
            return os.fstat(descriptor).st_size
        finally:
            os.close(descriptor)

    def remove(self, name: str) -> None:
        (self.root / name).unlink(missing_ok=True)

    def remove_folder(self, name: str) -> None:
        if name.strip("/"):  # never the whole root
            shutil.rmtree(self.root / name, ignore_errors=True)

    @property
    def uri(self) -> str:
        return str(self.root)


class S3Storage:
    """Files under `s3://bucket/prefix/`, through boto3 (endpoint_url for a local S3)."""

    def __init__(self, bucket: str, prefix: str, endpoint_url: str | None = None) -> None:
        from workloads.common.aws_client import aws_client

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self._client: Any = aws_client("s3", endpoint_url=endpoint_url, whole_answer=False)

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def write_bytes(self, name: str, data: bytes) -> None:
        self._client.put_object(Bucket=self.bucket, Key=self._key(name), Body=data)

    def read_bytes(self, name: str) -> bytes:
        with self._missing_as_not_found(name):
            body: bytes = self._client.get_object(Bucket=self.bucket, Key=self._key(name))[
                "Body"
            ].read()
        return body

    def read_chunks(self, name: str, limit: int) -> Iterator[bytes]:
        with self._missing_as_not_found(name):
            body = self._client.get_object(Bucket=self.bucket, Key=self._key(name))["Body"]
        try:
            yield from bounded(body.iter_chunks(CHUNK_BYTES), name, limit)
        finally:
            body.close()

    def names(self) -> list[str]:
        found: list[str] = []
        start = f"{self.prefix}/" if self.prefix else ""
        paginator = self._client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=start):
            found.extend(item["Key"][len(start) :] for item in page.get("Contents", []))
        return sorted(found)

    def size(self, name: str) -> int:
        with self._missing_as_not_found(name):
            head = self._client.head_object(Bucket=self.bucket, Key=self._key(name))
        return int(head["ContentLength"])

    @contextmanager
    def _missing_as_not_found(self, name: str) -> Iterator[None]:
        """S3's answer for a missing key (NoSuchKey from a GET, a bare 404 from a HEAD) as
        the FileNotFoundError every store raises; any other error as it came."""
        from botocore.exceptions import ClientError

        try:
            yield
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in MISSING_KEY_CODES:
                raise FileNotFoundError(f"s3://{self.bucket}/{self._key(name)}") from None
            raise

    def remove(self, name: str) -> None:
        self._client.delete_object(Bucket=self.bucket, Key=self._key(name))

    def remove_folder(self, name: str) -> None:
        folder = name.strip("/")
        if not folder:  # never the whole prefix
            return
        start = f"{self._key(folder)}/"
        paginator = self._client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=start):
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:  # at most 1000 a page, as delete_objects takes
                self._client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys})

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


def open_storage(uri: str, endpoint_url: str | None = None) -> Storage:
    """`s3://bucket/prefix` opens S3; anything else is a local directory."""
    parsed = urlparse(uri)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise UserError(f"storage URI {uri!r} names no bucket")
        return S3Storage(parsed.netloc, parsed.path, endpoint_url)
    if parsed.scheme not in ("", "file"):
        raise UserError(f"storage URI {uri!r}: scheme {parsed.scheme!r} is not s3 or a path")
    return LocalStorage(Path(parsed.path if parsed.scheme == "file" else uri))


@functools.lru_cache(maxsize=8)
def reused_storage(uri: str, endpoint_url: str | None = None) -> Storage:
    """open_storage, once per process for each (uri, endpoint): a worker that moves many
    files keeps one S3 client and its connections (making a boto3 client costs tens of ms of
    CPU, taken from the compute beside it)."""
    return open_storage(uri, endpoint_url)


def copy_all(source: Storage, destination: Storage) -> list[str]:
    """Copy every file of `source` into `destination`; returns the names copied."""
    names = source.names()
    for name in names:
        destination.write_bytes(name, source.read_bytes(name))
    return names
