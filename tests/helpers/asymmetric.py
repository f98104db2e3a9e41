"""An asymmetric seed-format profile: each direction across the sites has its own condition,
so a generator that shapes with the other direction's values is caught."""

from __future__ import annotations

from typing import Any

ONPREM_TO_CLOUD = {"rtt": [10, 3], "bandwidth": [20, 4], "jitter": [2, 0.25], "loss": [1.5, 0.2]}
CLOUD_TO_ONPREM = {"rtt": [40, 1], "bandwidth": [80, 2], "jitter": [4, 0.5], "loss": [0.5, 0.1]}


def asymmetric_document(document: dict[str, Any]) -> dict[str, Any]:
    """`document` (seed-format) with 20 Mbit/s on-prem -> cloud and 80 Mbit/s back."""
    for link in document["links"]:
        from_cloud, to_cloud = link["source"] == "Cloud", link["target"] == "Cloud"
        if from_cloud != to_cloud:
            link["condition"] = dict(CLOUD_TO_ONPREM if from_cloud else ONPREM_TO_CLOUD)
    return document
