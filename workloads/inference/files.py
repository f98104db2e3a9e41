"""The service's file store as users see it (`files-put`, `files-get`, `files-ls`): their
files under `files/` of the store, read and written straight to it (no Ray, no coordinator)."""

from __future__ import annotations

from pathlib import Path

from workloads.common.storage import Storage
from workloads.inference.endpoint import ServiceError

FILES_PREFIX = "files/"


def store_file(name: str) -> str:
    """Where a user's file NAME lives in the store."""
    return f"{FILES_PREFIX}{name}"


def files_put(store: Storage, local: Path, name: str) -> int:
    if not name or name.startswith("/") or ".." in name.split("/"):
        raise ServiceError(f"NAME {name!r}: give a relative name without '..'")
    if not local.is_file():
        raise ServiceError(f"LOCAL {str(local)!r}: no such file")
    data = local.read_bytes()
    store.write_bytes(store_file(name), data)
    return len(data)


def files_get(store: Storage, name: str, local: Path) -> int:
    if name not in files_ls(store):
        raise ServiceError(f"NAME {name!r}: no such file in the store (files-ls lists them)")
    data = store.read_bytes(store_file(name))
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(data)
    return len(data)


def files_ls(store: Storage) -> list[str]:
    return [name.removeprefix(FILES_PREFIX) for name in store.names()
            if name.startswith(FILES_PREFIX)]
