"""`invoke fetch-prices`: a fresh spot price trace from EC2, in the same JSON shape as
`aws ec2 describe-spot-price-history` (what the DOLL workload reads)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from vocab.errors import UserError
from workloads.common.aws_client import aws_client

TRACE_FIELDS = ("AvailabilityZone", "InstanceType", "ProductDescription", "SpotPrice", "Timestamp")


def fetch_spot_prices(
    instance_type: str,
    region: str,
    days: float,
    out: Path,
    endpoint_url: str | None = None,
    now: datetime | None = None,
) -> int:
    """Write every spot price record of the last `days` days to `out`; returns the count."""
    end = now or datetime.now(UTC)
    client: Any = aws_client("ec2", region=region, endpoint_url=endpoint_url)
    records: list[dict[str, str]] = []
    paginator = client.get_paginator("describe_spot_price_history")
    pages = paginator.paginate(
        InstanceTypes=[instance_type], StartTime=end - timedelta(days=days), EndTime=end
    )
    for page in pages:
        for item in page["SpotPriceHistory"]:
            record = {field: item[field] for field in TRACE_FIELDS}
            record["Timestamp"] = item["Timestamp"].isoformat()
            records.append(record)
    if not records:
        raise UserError(
            f"EC2 returned no spot prices for {instance_type} in {region} over {days} days"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_suffix(out.suffix + ".partial")
    temporary.write_text(json.dumps({"SpotPriceHistory": records}, indent=4) + "\n")
    temporary.replace(out)
    return len(records)
