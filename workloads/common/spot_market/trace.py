"""Spot price traces in AWS `describe-spot-price-history` JSON, replayed with time compressed.

The file holds `{"SpotPriceHistory": [{AvailabilityZone, InstanceType, ProductDescription,
SpotPrice, Timestamp}, ...]}` in any order; one zone + product is selected from it.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from vocab.errors import UserError
from workloads.common.input_files import MB, InputFileError, read_input_json

TRACES_DIR = Path(__file__).resolve().parent / "traces"
DEFAULT_TRACE = TRACES_DIR / "c5.xlarge_ca-central-1_2021-02-19_2021-05-10.json"
REQUIRED_FIELDS = ("AvailabilityZone", "ProductDescription", "SpotPrice", "Timestamp")
TRACE_FLAG = "--trace"
MAX_TRACE_BYTES = 256 * MB
"""A year of one region's describe-spot-price-history for every type is well under this."""


class TraceError(UserError, ValueError):
    """A trace file that cannot be used, with what was found in it."""


@dataclass(frozen=True)
class PriceTrace:
    """Prices of one zone + product: `prices[i]` holds from `times[i]` (seconds since the
    first record) until the next record."""

    file: Path
    zone: str
    product: str
    times: tuple[float, ...]
    prices: tuple[float, ...]

    @property
    def span_s(self) -> float:
        return self.times[-1]

    def mean_price(self) -> float:
        """Time-weighted mean over the trace (the single price when it has one record)."""
        if self.span_s == 0:
            return self.prices[0]
        weighted = sum(
            price * (end - start)
            for price, start, end in zip(self.prices, self.times, self.times[1:], strict=False)
        )
        return weighted / self.span_s


def _parse_record(index: int, record: Any) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise TraceError(f"record {index} is a {type(record).__name__}, not an object")
    missing = [field for field in REQUIRED_FIELDS if field not in record]
    if missing:
        raise TraceError(f"record {index} lacks {', '.join(missing)} (has {sorted(record)})")
    try:
        price = float(record["SpotPrice"])
    except (TypeError, ValueError):
        raise TraceError(
            f"record {index}: SpotPrice {record['SpotPrice']!r} is not a number"
        ) from None
    if not math.isfinite(price) or price < 0:
        raise TraceError(f"record {index}: SpotPrice {record['SpotPrice']!r} is not a price "
                         f"(a finite number ≥ 0)")
    try:
        stamp = datetime.fromisoformat(str(record["Timestamp"]))
    except ValueError:
        raise TraceError(
            f"record {index}: Timestamp {record['Timestamp']!r} is not an ISO 8601 time"
        ) from None
    if stamp.tzinfo is None:
        raise TraceError(f"record {index}: Timestamp {record['Timestamp']!r} has no time zone")
    return {
        "zone": record["AvailabilityZone"],
        "product": record["ProductDescription"],
        "price": price,
        "time": stamp.timestamp(),
    }


def load_trace(file: Path, zone: str, product: str) -> PriceTrace:
    """Read an AWS spot price history file (given by --trace) and select one zone + product;
    any problem is a TraceError naming --trace."""
    try:
        document = read_input_json(TRACE_FLAG, Path(file), max_bytes=MAX_TRACE_BYTES)
    except InputFileError as error:
        raise TraceError(str(error)) from None
    try:
        return _select(file, document, zone, product)
    except TraceError as error:
        raise TraceError(f"{TRACE_FLAG}: {error}") from None


def _select(file: Path, document: Any, zone: str, product: str) -> PriceTrace:
    history = document.get("SpotPriceHistory") if isinstance(document, dict) else None
    if not isinstance(history, list):
        found = sorted(document) if isinstance(document, dict) else type(document).__name__
        raise TraceError(f"trace {file} has no 'SpotPriceHistory' list (found {found})")
    if not history:
        raise TraceError(f"trace {file}: 'SpotPriceHistory' is empty")
    records = [_parse_record(index, record) for index, record in enumerate(history)]
    chosen = sorted(
        (r["time"], r["price"]) for r in records if r["zone"] == zone and r["product"] == product
    )
    if not chosen:
        zones = sorted({r["zone"] for r in records})
        products = sorted({r["product"] for r in records})
        raise TraceError(
            f"trace {file} has no records for zone {zone!r} and product {product!r} "
            f"(zones found: {zones}; products found: {products})"
        )
    start = chosen[0][0]
    return PriceTrace(
        file=Path(file),
        zone=zone,
        product=product,
        times=tuple(time - start for time, _ in chosen),
        prices=tuple(price for _, price in chosen),
    )


def fixed_price(price: float) -> PriceTrace:
    """A spot price that never changes (for capacity traces that carry no prices)."""
    return PriceTrace(file=Path("fixed"), zone="", product="", times=(0.0,), prices=(price,))


def job_prices(file: Path, zone: str, product: str, fixed: float | None) -> PriceTrace:
    """A run's spot prices: `fixed` when given, else the zone and product of the trace."""
    return fixed_price(fixed) if fixed is not None else load_trace(file, zone, product)


@dataclass(frozen=True)
class TraceReplay:
    """The trace played in wall-clock seconds: `compression` trace seconds per wall second,
    starting at its first record and looping when it runs out."""

    trace: PriceTrace
    compression: float

    @property
    def loop_s(self) -> float:
        return self.trace.span_s / self.compression

    def price_at(self, wall_s: float) -> float:
        if self.loop_s == 0:
            return self.trace.prices[0]
        trace_s = (wall_s % self.loop_s) * self.compression
        return self.trace.prices[bisect.bisect_right(self.trace.times, trace_s) - 1]

    def changes_between(self, start_s: float, end_s: float) -> list[tuple[float, float]]:
        """(wall time, new price) for every record replayed in (start_s, end_s]. The last
        record marks where the loop restarts with the first one, so it is never replayed."""
        if self.loop_s == 0:
            return []
        changes: list[tuple[float, float]] = []
        loop = int(start_s // self.loop_s)
        while loop * self.loop_s <= end_s:
            for trace_s, price in zip(self.trace.times[:-1], self.trace.prices, strict=False):
                wall = loop * self.loop_s + trace_s / self.compression
                if start_s < wall <= end_s:
                    changes.append((wall, price))
            loop += 1
        return changes
