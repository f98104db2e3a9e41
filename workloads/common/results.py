"""The ONE results writer: `<out>/summary.json`, `provenance.json`, `records/<name>.jsonl`.

Everything is collected in memory and written at the end, so a run that fails leaves no
half-written folder behind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from workloads.common.options import option
from workloads.common.storage import Storage, open_storage
from workloads.common.transport import encode


def default_location(workload: str, now: datetime | None = None) -> str:
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"results/{workload}/{stamp}"


@dataclass(frozen=True, kw_only=True)
class ResultsOptions:
    """The flags a launcher sets on a workload's command line for each target: where the
    results go and the target's label. A workload's options dataclass inherits them."""

    out: str | None = option(
        None,
        "results folder or s3://bucket/prefix (not set: results/<workload>/<timestamp>)",
        launcher=True,
    )
    s3_endpoint: str | None = option(
        None, "S3 endpoint URL for --out s3://... (a local S3)", launcher=True
    )
    results_to_log: bool = option(
        False,
        "also print the results as one line of the log (for a launcher without a bucket)",
        launcher=True,
    )
    target: str = option("local", "where this runs, as recorded in summary.json", launcher=True)


def _json_bytes(document: Any) -> bytes:
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()


class ResultsWriter:
    def __init__(self, workload: str, out: str | None, endpoint_url: str | None = None) -> None:
        self.location = out or default_location(workload)
        self.endpoint_url = endpoint_url
        self._records: dict[str, list[dict[str, Any]]] = {}
        self._files: dict[str, bytes] = {}

    def add_file(self, name: str, data: bytes) -> None:
        """A file written with the results (and carried in the log line with them), such as
        a checkpoint the workload already wrote to the storage as it ran."""
        self._files[name] = data

    def add_records(self, name: str, rows: list[dict[str, Any]]) -> None:
        self._records.setdefault(name, []).extend(rows)

    def files(self, summary: dict[str, Any], provenance: dict[str, Any]) -> dict[str, bytes]:
        files = dict(self._files)
        files.update({"summary.json": _json_bytes(summary),
                      "provenance.json": _json_bytes(provenance)})
        for name, rows in self._records.items():
            lines = "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows)
            files[f"records/{name}.jsonl"] = lines.encode()
        return files

    def finish(
        self, summary: dict[str, Any], provenance: dict[str, Any], to_log: bool = False
    ) -> Storage:
        """Write every file; with `to_log`, also print them as one transport line."""
        files = self.files(summary, provenance)
        storage = open_storage(self.location, self.endpoint_url)
        for name, data in files.items():
            storage.write_bytes(name, data)
        if to_log:
            print(encode(files), flush=True)
        return storage


def read_records(storage: Storage, name: str) -> list[dict[str, Any]]:
    text = storage.read_bytes(f"records/{name}.jsonl").decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def read_json(storage: Storage, name: str) -> Any:
    return json.loads(storage.read_bytes(name))
