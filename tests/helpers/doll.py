"""A DOLL run small enough for a test (a few seconds on a local Ray)."""

from __future__ import annotations

TINY_DOLL_ARGS = (
    "--policy",
    "on-demand",
    "--workers",
    "2",
    "--batches",
    "40",
    "--batch-size",
    "16",
    "--rate",
    "128",
    "-k",
    "2",
    "--eval-every",
    "5",
)
