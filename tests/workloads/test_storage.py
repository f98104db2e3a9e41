"""One contract for both stores: a missing name is FileNotFoundError from every read, so no
caller matches an S3 error's text; S3 through boto3 against a real moto_server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.helpers.processes import FAKE_CREDENTIALS, moto_server
from workloads.common.storage import (
    CHUNK_BYTES,
    FileTooLarge,
    LocalStorage,
    S3Storage,
    Storage,
    open_storage,
)

BUCKET = "store-contract"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in FAKE_CREDENTIALS.items():
            patch.setenv(name, value)
        with moto_server() as endpoint:
            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
            yield endpoint


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    if request.param == "local":
        yield LocalStorage(tmp_path / "store")
        return
    endpoint = request.getfixturevalue("s3_endpoint")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in FAKE_CREDENTIALS.items():
            patch.setenv(name, value)
        yield open_storage(f"s3://{BUCKET}/{request.node.name}", endpoint)


@pytest.mark.moto
@pytest.mark.subprocess
def test_a_missing_name_is_file_not_found_from_every_read(store: Storage) -> None:
    store.write_bytes("here/a.json", b"{}")
    for read in (store.read_bytes, store.size):
        with pytest.raises(FileNotFoundError, match="here/b.json"):
            read("here/b.json")
    assert store.read_bytes("here/a.json") == b"{}"
    assert store.size("here/a.json") == 2
    store.remove("here/a.json")
    with pytest.raises(FileNotFoundError):
        store.read_bytes("here/a.json")


@pytest.mark.moto
@pytest.mark.subprocess
def test_s3_errors_other_than_a_missing_key_come_as_they_are(s3_endpoint: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in FAKE_CREDENTIALS.items():
            patch.setenv(name, value)
        store = S3Storage("no-such-bucket", "x", s3_endpoint)
        with pytest.raises(ClientError) as raised:
            store.read_bytes("a.json")
    assert raised.value.response["Error"]["Code"] == "NoSuchBucket"


def test_a_read_is_bounded_by_what_was_reserved_for_it(store: Storage) -> None:
    """A file replaced by a larger one between its size check and its read gets no
    further than the size that was checked, from either store."""
    store.write_bytes("files/model", b"m" * 10)
    checked = store.size("files/model")
    store.write_bytes("files/model", b"m" * (3 * CHUNK_BYTES))  # swapped meanwhile
    with pytest.raises(FileTooLarge, match="files/model: more than the 10 bytes"):
        for _ in store.read_chunks("files/model", checked):
            pass
    assert b"".join(store.read_chunks("files/model", 3 * CHUNK_BYTES)) == b"m" * (
        3 * CHUNK_BYTES)


def test_a_folder_store_reads_no_link_and_no_special_file(tmp_path: Path) -> None:
    import os

    store = LocalStorage(tmp_path / "store")
    store.write_bytes("files/plain", b"ok")
    secret = tmp_path / "secret"
    secret.write_text("beside the store")
    os.symlink(secret, tmp_path / "store" / "files" / "link")
    os.symlink(tmp_path, tmp_path / "store" / "up")
    os.mkfifo(tmp_path / "store" / "files" / "fifo")
    assert store.names() == ["files/plain"]
    for name in ("files/link", "up/secret", "files/fifo", "files/../files/plain"):
        for read in (store.read_bytes, store.size,
                     lambda n: b"".join(store.read_chunks(n, 100))):
            with pytest.raises(OSError) as refused:
                read(name)
            assert "beside the store" not in str(refused.value), name
    assert store.read_bytes("files/plain") == b"ok"
