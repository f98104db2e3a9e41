"""The dated price table (`vocab/prices.json`) and the one rule that prices a node, read by
the stack's cost estimate (`stacks/costs.py`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import mean
from typing import Any

PRICE_TABLE = Path(__file__).with_name("prices.json")
HOURS_PER_MONTH = 730


def load_price_table(path: Path = PRICE_TABLE) -> dict[str, Any]:
    table: dict[str, Any] = json.loads(path.read_text())
    return table


def node_price(
    instances: Mapping[str, Any], instance_types: Sequence[str], spot: bool
) -> float | None:
    """$/h of one node that may be any of `instance_types` (diversified spot capacity lands
    on any of them: their mean); None when a type is not in the table."""
    market = "spot" if spot else "on_demand"
    known = [instances[name][market] for name in instance_types if name in instances]
    return mean(known) if known and len(known) == len(instance_types) else None


def kms_key_hourly(table: Mapping[str, Any]) -> float:
    return float(table["hourly"]["kms_key_month"]) / HOURS_PER_MONTH
