import json
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from botocore.stub import ANY, Stubber

import launch.spot_prices as spot_prices
from launch.options import FETCH_PRICES_SPEC
from launch.spot_prices import fetch_spot_prices
from tests.helpers.processes import FAKE_CREDENTIALS, moto_server
from workloads.common.options import OptionError
from workloads.common.spot_market.trace import load_trace


@pytest.mark.moto
@pytest.mark.subprocess
def test_fetch_from_a_local_moto_server_writes_a_trace_doll_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "prices" / "c5.json"
    with moto_server() as endpoint:
        count = fetch_spot_prices("c5.xlarge", "us-east-1", 90, out, endpoint_url=endpoint)
    records = json.loads(out.read_text())["SpotPriceHistory"]
    assert count == len(records) > 0
    assert {r["InstanceType"] for r in records} == {"c5.xlarge"}
    first = records[0]
    trace = load_trace(out, first["AvailabilityZone"], first["ProductDescription"])
    assert trace.prices[0] == float(first["SpotPrice"])


def test_every_page_is_fetched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = boto3.client(
        "ec2", region_name="ca-central-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    stamp = datetime(2021, 3, 1, tzinfo=UTC)

    def item(zone: str, price: str) -> dict[str, object]:
        return {
            "AvailabilityZone": zone,
            "InstanceType": "c5.xlarge",
            "ProductDescription": "SUSE Linux",
            "SpotPrice": price,
            "Timestamp": stamp,
        }

    expected = {"InstanceTypes": ["c5.xlarge"], "StartTime": ANY, "EndTime": ANY}
    with Stubber(client) as stub:
        stub.add_response(
            "describe_spot_price_history",
            {"SpotPriceHistory": [item("ca-central-1a", "0.15")], "NextToken": "2"},
            expected,
        )
        stub.add_response(
            "describe_spot_price_history",
            {"SpotPriceHistory": [item("ca-central-1b", "0.16")]},
            {**expected, "NextToken": "2"},
        )
        monkeypatch.setattr(spot_prices, "aws_client", lambda *a, **k: client)
        assert fetch_spot_prices("c5.xlarge", "ca-central-1", 7, tmp_path / "t.json") == 2
    records = json.loads((tmp_path / "t.json").read_text())["SpotPriceHistory"]
    assert [r["AvailabilityZone"] for r in records] == ["ca-central-1a", "ca-central-1b"]
    assert records[0]["Timestamp"] == "2021-03-01T00:00:00+00:00"


@pytest.mark.parametrize("days", ["0", "-1", "91", "nan"])
def test_bad_days_are_refused_by_the_task_flags(days: str) -> None:
    with pytest.raises(OptionError, match="--days"):
        FETCH_PRICES_SPEC.from_text({"days": days})
