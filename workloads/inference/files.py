"""The service's file store as users see it (`files-put`, `files-get`, `files-ls`): their
files in the `files/` folder (or prefix) of the store, read and written straight to it (no
Ray, no coordinator). Opened on that folder alone, so listing it never walks the thousands
of parts the jobs write beside it."""

from __future__ import annotations

from pathlib import Path

from workloads.common.storage import Storage, open_storage
from workloads.inference.endpoint import ServiceError

FILES_FOLDER = "files"


def store_file(name: str) -> str:
    """Where a user's file NAME lives in the (whole) store."""
    return f"{FILES_FOLDER}/{name}"


def files_storage(store: str, endpoint_url: str | None = None) -> Storage:
    """The users' files of the store at `store` (a folder or s3://bucket/prefix)."""
    return open_storage(f"{store.rstrip('/')}/{FILES_FOLDER}", endpoint_url)


def files_put(files: Storage, local: Path, name: str) -> int:
    if not name or name.startswith("/") or ".." in name.split("/"):
        raise ServiceError(f"NAME {name!r}: give a relative name without '..'")
    if not local.is_file():
        raise ServiceError(f"LOCAL {str(local)!r}: no such file")
    data = local.read_bytes()
    files.write_bytes(name, data)
    return len(data)


def files_get(files: Storage, name: str, local: Path) -> int:
    if name not in files.names():
        raise ServiceError(f"NAME {name!r}: no such file in the store (files-ls lists them)")
    data = files.read_bytes(name)
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(data)
    return len(data)


def files_ls(files: Storage) -> list[str]:
    return files.names()
