"""One contract for both stores: a missing name is FileNotFoundError from every read, so no
caller matches an S3 error's text; S3 through boto3 against a real moto_server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.helpers.processes import FAKE_CREDENTIALS, moto_server
from workloads.common.storage import LocalStorage, S3Storage, Storage, open_storage

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
