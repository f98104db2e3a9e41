import json
from pathlib import Path

import pytest

from workloads.common.spot_market.trace import DEFAULT_TRACE, TraceError, TraceReplay, load_trace


def write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(document))
    return path


def record(zone: str, product: str, price: str, stamp: str) -> dict[str, str]:
    return {
        "AvailabilityZone": zone,
        "InstanceType": "c5.xlarge",
        "ProductDescription": product,
        "SpotPrice": price,
        "Timestamp": stamp,
    }


def test_shipped_trace_selects_suse_in_ca_central_1b() -> None:
    trace = load_trace(DEFAULT_TRACE, "ca-central-1b", "SUSE Linux")
    assert len(trace.prices) == 155
    assert trace.times[0] == 0 and list(trace.times) == sorted(trace.times)
    assert 0.1578 <= trace.mean_price() <= 0.1623
    linux = load_trace(DEFAULT_TRACE, "ca-central-1b", "Linux/UNIX")
    assert linux.mean_price() == pytest.approx(trace.mean_price() - 0.1, abs=1e-3)


def test_unknown_zone_names_what_the_file_has() -> None:
    with pytest.raises(TraceError) as error:
        load_trace(DEFAULT_TRACE, "ca-central-1z", "SUSE Linux")
    message = str(error.value)
    assert "'ca-central-1z'" in message and "ca-central-1a" in message and "Windows" in message


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"SpotPriceHistory": []}, "'SpotPriceHistory' is empty"),
        ({"Prices": []}, "no 'SpotPriceHistory' list (found ['Prices'])"),
        ({"SpotPriceHistory": [{"SpotPrice": "1"}]}, "record 0 lacks AvailabilityZone"),
        (
            {"SpotPriceHistory": [record("z", "p", "cheap", "2021-01-01T00:00:00+00:00")]},
            "record 0: SpotPrice 'cheap' is not a number",
        ),
        (
            {"SpotPriceHistory": [record("z", "p", "0.1", "yesterday")]},
            "record 0: Timestamp 'yesterday' is not an ISO 8601 time",
        ),
    ],
)
def test_malformed_traces_are_refused_naming_the_field(
    tmp_path: Path, document: object, expected: str
) -> None:
    with pytest.raises(TraceError, match=None) as error:
        load_trace(write(tmp_path, document), "z", "p")
    assert expected in str(error.value)


def test_not_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text("{not json")
    with pytest.raises(TraceError, match="is not JSON"):
        load_trace(path, "z", "p")


def test_replay_compresses_time_and_loops(tmp_path: Path) -> None:
    stamps = ["2021-01-01T00:00:00+00:00", "2021-01-01T01:00:00+00:00", "2021-01-01T03:00:00+00:00"]
    path = write(
        tmp_path,
        {"SpotPriceHistory": [record("z", "p", p, s) for p, s in zip("123", stamps, strict=True)]},
    )
    replay = TraceReplay(load_trace(path, "z", "p"), compression=3600.0)  # 1 h -> 1 s
    assert replay.loop_s == 3.0
    assert [replay.price_at(t) for t in (0.0, 0.99, 1.0, 2.5, 3.0, 4.2)] == [1, 1, 2, 2, 1, 2]
    assert replay.changes_between(0.5, 7.0) == [
        (1.0, 2.0),
        (3.0, 1.0),
        (4.0, 2.0),
        (6.0, 1.0),
        (7.0, 2.0),
    ]
