"""A DOLL run small enough for a test (a few seconds on a local Ray), and a one-record price
trace to travel with it as an input file."""

from __future__ import annotations

import json
from pathlib import Path

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
    "512",
    "-k",
    "2",
    "--eval-every",
    "5",
)


def one_price_trace(folder: Path) -> Path:
    """A trace of one c5.xlarge spot price in zone lab-1a, product Linux/UNIX."""
    trace = folder / "flat.json"
    record = {
        "AvailabilityZone": "lab-1a",
        "InstanceType": "c5.xlarge",
        "ProductDescription": "Linux/UNIX",
        "SpotPrice": "0.05",
        "Timestamp": "2024-01-01T00:00:00+00:00",
    }
    trace.write_text(json.dumps({"SpotPriceHistory": [record]}))
    return trace
