"""A task file for `invoke run-burst -f`: every entry of --inputs (a text file, or a folder
of text files) is one task, and `process(path)` returns its word statistics.

Run it through both burst schedulers (see docs/burst.md, "Your own tasks"):

    invoke run-burst -f examples/burst/word_stats.py --function process \
        --inputs examples/burst/texts --bw 100

`process` gets the path where its input can be read on the node that runs it: in place on
the HPC site, a staged copy in the cloud. What it returns must be JSON (a dict, a list, a
number, a string); it lands in outputs/<scheduler>.jsonl as {"input": ..., "result": ...}.
"""

from __future__ import annotations

import collections
import hashlib
import re
from pathlib import Path

WORD = re.compile(r"[a-z']+")


def text_files(path: Path) -> list[Path]:
    """The input's text files: the file itself, or every file under the folder, in order."""
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file())


def process(path: str) -> dict[str, object]:
    """Words, distinct words, the three most common and a digest of the input's text."""
    counts: collections.Counter[str] = collections.Counter()
    digest = hashlib.sha256()
    files = text_files(Path(path))
    for file in files:
        text = file.read_text()
        digest.update(text.encode())
        counts.update(WORD.findall(text.lower()))
    return {
        "files": len(files),
        "words": sum(counts.values()),
        "distinct": len(counts),
        "top": [word for word, _ in counts.most_common(3)],
        "sha256": digest.hexdigest()[:16],
    }
