"""Results carried back inside a job's log: one marked line holding a gzipped tar, base64.

Used when a job has no bucket to write to: the launcher reads the line out of the log it
streams anyway, so results come back from any Ray cluster with nothing else deployed.
"""

from __future__ import annotations

import base64
import io
import tarfile

MARKER = "@@spotburst-results@@ "


def encode(files: dict[str, bytes]) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return MARKER + base64.b64encode(buffer.getvalue()).decode("ascii")


def decode(line: str) -> dict[str, bytes]:
    if not line.startswith(MARKER):
        raise ValueError("not a results line")
    raw = base64.b64decode(line[len(MARKER) :].strip())
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as archive:
        for member in archive.getmembers():
            if not member.isfile() or member.name.startswith("/") or ".." in member.name:
                raise ValueError(f"unsafe member {member.name!r} in results archive")
            extracted = archive.extractfile(member)
            assert extracted is not None
            files[member.name] = extracted.read()
    return files


def find_in_log(log: str) -> dict[str, bytes] | None:
    """The last results line of a log, decoded; None when the log has none."""
    found = [line for line in log.splitlines() if line.startswith(MARKER)]
    return decode(found[-1]) if found else None
