"""The service's file store as users see it (`files-put`, `files-get`, `files-ls`): their
files in the `files/` folder (or prefix) of the store, read and written straight to it (no
Ray, no coordinator). Opened on that folder alone, so listing it never walks the parts the
jobs write beside it. A name is one plain file name (`options.check_name`), a file at most
MAX_FILE_BYTES."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vocab.errors import one_line
from workloads.common.options import OptionError
from workloads.common.storage import Storage, open_storage
from workloads.inference.endpoint import ServiceError
from workloads.inference.options import MAX_FILE_BYTES, check_name

FILES_FOLDER = "files"
JOBS_FOLDER = "service/jobs"
"""The coordinator's record of each job: <name>.json."""
ADDING_FOLDER = "service/adding"
"""The jobs being added, while their files are checked: <name>.json naming the files."""


def store_file(name: str) -> str:
    """Where a user's file NAME lives in the (whole) store."""
    return f"{FILES_FOLDER}/{name}"


def files_storage(store: str, endpoint_url: str | None = None) -> Storage:
    """The users' files of the store at `store` (a folder or s3://bucket/prefix)."""
    return open_storage(f"{store.rstrip('/')}/{FILES_FOLDER}", endpoint_url)


@contextmanager
def store_errors(store: str) -> Iterator[None]:
    """The store failing under a command (an S3 that does not answer or refuses, a folder
    that cannot be written) as one line naming it."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except (OSError, BotoCoreError, ClientError) as error:
        raise ServiceError(f"the store {store}: {one_line(error)}") from None


def _name(name: str) -> str:
    try:
        return check_name("NAME", name)
    except OptionError as error:
        raise ServiceError(str(error)) from None


def jobs_using(store: Storage, name: str) -> list[str]:
    """The jobs whose record in the store names the file `name` as one of theirs, and those
    being added with it."""
    using = []
    for file in store.names():
        folder = file.rpartition("/")[0]
        if not (folder in (JOBS_FOLDER, ADDING_FOLDER) and file.endswith(".json")):
            continue
        try:
            record = json.loads(store.read_bytes(file))
        except (ValueError, OSError):
            continue  # a record the coordinator skips, too
        if isinstance(record, dict) and name in (record.get("model"), record.get("testset"),
                                                 record.get("labels")):
            using.append(file.rpartition("/")[2].removesuffix(".json"))
    return sorted(using)


def files_put(files: Storage, local: Path, name: str, store: Storage | None = None) -> int:
    """`local` into the store as `name`; refused while a job (its record in `store`, the
    whole store) uses a file of that name: a job answers with the files it was added with."""
    name = _name(name)
    if not local.is_file():
        raise ServiceError(f"LOCAL {str(local)!r}: no such file")
    if store is not None and name in files.names() and (using := jobs_using(store, name)):
        raise ServiceError(f"NAME {name!r}: job {using[0]!r} uses it (job-remove the job "
                           "first, or put the file under another name)")
    size = local.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ServiceError(f"LOCAL {str(local)!r}: {size} bytes, more than the "
                           f"{MAX_FILE_BYTES} a node holds")
    data = local.read_bytes()
    files.write_bytes(name, data)
    return len(data)


def files_get(files: Storage, name: str, local: Path) -> int:
    name = _name(name)
    if name not in files.names():
        raise ServiceError(f"NAME {name!r}: no such file in the store (files-ls lists them)")
    if local.is_dir():
        raise ServiceError(f"LOCAL {str(local)!r}: a folder; give the file to write")
    data = files.read_bytes(name)
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(data)
    return len(data)


def files_ls(files: Storage) -> list[str]:
    return files.names()
