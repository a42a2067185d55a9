"""The aws source against a real moto server (EC2), with Price List and Service Quotas answered
in AWS's documented formats (moto serves neither), and failures injected on the HTTP path."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from catalog_db import queries
from catalog_db.connection import read_connection
from catalog_db.inventory.aws_source import (
    AwsSource,
    latest_spot_prices,
    on_demand_prices,
    retry_config,
    session_clients,
)
from catalog_db.inventory.snapshots import (
    latest_good_snapshot,
    offers,
    snapshot_items,
    take_snapshot,
)
from planning.domain import Pricing
from tests.catalog_db.inventory.aws_fakes import (
    answer_pricing,
    fail_ec2,
    price_document,
    stub_quotas,
)
from tests.catalog_db.inventory.conftest import FAKE_KEY_ID, FAKE_SECRET, FAKE_TOKEN

# moto's ap-southeast-3 and il-central-1 offer few GPU types (20 and 9): fast to read.
MAIN, OTHER = "ap-southeast-3", "il-central-1"
QUOTAS = {  # vCPUs per (group, pricing), as an account might have them
    ("G", "on_demand"): 256.0,
    ("G", "spot"): 64.0,
    ("P", "on_demand"): 384.0,
    ("P", "spot"): 192.0,
}


def catalog_prices(catalog_path: Path) -> Callable[[str, str], float | None]:
    """A Price List stand-in: the catalog's us-east-1 on-demand price of a type (for any
    region asked; moto's small regions keep the tests fast), None for types it lacks."""
    with read_connection(catalog_path) as con:
        rows = queries.instance_types(con, "aws")
    prices = {
        r.instance_type: r.ondemand_usd_per_hr
        for r in rows
        if r.region == "us-east-1" and r.ondemand_usd_per_hr is not None
    }
    return lambda instance_type, region: prices.get(instance_type)


def factory(
    session: boto3.Session,
    endpoint: str,
    price_of: Callable[[str, str], float | None],
    ec2_hook: Callable[[Any, str], None] | None = None,
    max_attempts: int = 5,
) -> Callable[[str, str], Any]:
    """Real clients to moto; pricing answered from `price_of`, quotas stubbed, ec2 hookable."""
    base = session_clients(session, endpoint, retry_config(max_attempts, 2.0, 10.0))
    prepared: set[tuple[str, str]] = set()

    def client(service: str, region: str) -> Any:
        made = base(service, region)
        if (service, region) not in prepared:
            prepared.add((service, region))
            if service == "pricing":
                answer_pricing(made, price_of)
            elif service == "service-quotas":
                stub_quotas(made, QUOTAS)
            elif service == "ec2" and ec2_hook is not None:
                ec2_hook(made, region)
        return made

    return client


def vcpus_of(session: boto3.Session, endpoint: str, instance_type: str) -> int:
    ec2 = session.client("ec2", region_name=MAIN, endpoint_url=endpoint)
    info = ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"][0]
    return int(info["VCpuInfo"]["DefaultVCpus"])


def _item(items: Any, region: str, instance_type: str, pricing: Pricing) -> Any:
    found = [
        i
        for i in items
        if (i.region, i.instance_type, i.pricing) == (region, instance_type, pricing)
    ]
    assert len(found) == 1, (region, instance_type, pricing, found)
    return found[0]


def test_happy_path_two_regions(catalog_path: Path, moto: str, aws_session: boto3.Session) -> None:
    ec2 = aws_session.client("ec2", region_name=MAIN, endpoint_url=moto)
    ec2.run_instances(ImageId="ami-12345678", MinCount=2, MaxCount=2, InstanceType="g5.12xlarge")
    ec2.run_instances(
        ImageId="ami-12345678",
        MinCount=1,
        MaxCount=1,
        InstanceType="p5.48xlarge",
        InstanceMarketOptions={"MarketType": "spot"},
    )
    price_of = catalog_prices(catalog_path)
    source = AwsSource(
        regions=(MAIN, OTHER),
        session=aws_session,
        client_factory=factory(aws_session, moto, price_of),
    )
    result = take_snapshot(catalog_path, source)

    assert not result.stale and result.snapshot is not None
    assert result.snapshot.status == "ok", result.snapshot.error
    assert result.snapshot.regions == (MAIN, OTHER)
    with read_connection(catalog_path) as con:
        items = snapshot_items(con, result.snapshot.snapshot_id)
        planner = offers(con, result.snapshot.snapshot_id)
    assert {i.region for i in items} == {MAIN, OTHER}

    # On demand: price from the Price List, count = (quota - running vCPUs) // vCPUs per machine.
    used_g = 2 * vcpus_of(aws_session, moto, "g5.12xlarge")
    for itype in ("g5.xlarge", "g5.12xlarge"):
        row = _item(items, MAIN, itype, Pricing.ON_DEMAND)
        assert row.gpu_type == "A10G" and row.known_gpu
        assert row.price_usd_per_hr == price_of(itype, MAIN)
        expected = int((QUOTAS[("G", "on_demand")] - used_g) // vcpus_of(aws_session, moto, itype))
        assert row.available_count == expected
    # The running spot p5.48xlarge uses the whole P spot quota in MAIN; OTHER is untouched.
    p5_spot = vcpus_of(aws_session, moto, "p5.48xlarge")
    assert _item(items, MAIN, "p5.48xlarge", Pricing.SPOT).available_count == int(
        (QUOTAS[("P", "spot")] - p5_spot) // p5_spot
    )
    assert _item(items, OTHER, "g5.12xlarge", Pricing.ON_DEMAND).available_count == int(
        QUOTAS[("G", "on_demand")] // vcpus_of(aws_session, moto, "g5.12xlarge")
    )
    # A type the catalog does not list is mapped through GpuInfo name + memory; with no
    # on-demand price it is stored but not offered.
    p5_small = _item(items, MAIN, "p5.4xlarge", Pricing.ON_DEMAND)
    assert p5_small.gpu_type == "H100-SXM" and p5_small.price_usd_per_hr is None
    # The planner sees priced, known rows only, keyed per region.
    keys = {(o.region, o.instance_type, o.pricing) for o in planner}
    assert (OTHER, "g5.xlarge", Pricing.ON_DEMAND) in keys
    assert (MAIN, "p5.4xlarge", Pricing.ON_DEMAND) not in keys
    assert all(o.gpu_type and o.price_usd_per_hr > 0 for o in planner)
    # Spot rows carry moto's spot price and the zone it came from.
    spot = _item(items, OTHER, "g5.xlarge", Pricing.SPOT)
    assert spot.price_usd_per_hr and spot.price_usd_per_hr > 0 and OTHER in spot.provenance

    # g5g carries NVIDIA T4g (GpuInfo), which the catalog has no GPU type for: kept, flagged.
    flagged = _item(items, MAIN, "g5g.metal", Pricing.ON_DEMAND)
    assert flagged.gpu_type is None and not flagged.known_gpu
    assert "unknown to the catalog" in flagged.provenance
    assert not any(o.instance_type == "g5g.metal" for o in planner)


def test_region_without_gpu_offerings(
    catalog_path: Path, moto: str, aws_session: boto3.Session
) -> None:
    # moto's ca-west-1 offers ~870 instance types, none of the P or G/VT families.
    source = AwsSource(
        regions=("ca-west-1", OTHER),
        session=aws_session,
        client_factory=factory(aws_session, moto, lambda t, r: 2.0),
    )
    result = take_snapshot(catalog_path, source)
    assert result.snapshot is not None and result.snapshot.status == "ok"
    with read_connection(catalog_path) as con:
        items = snapshot_items(con, result.snapshot.snapshot_id)
        params = con.execute(
            "SELECT params->>'$.regions_without_gpu_offerings[0]' FROM inventory_snapshots "
            "WHERE snapshot_id = ?",
            [result.snapshot.snapshot_id],
        ).fetchone()
    assert {i.region for i in items} == {OTHER}
    assert params == ("ca-west-1",)


def test_throttling_then_success_is_retried(
    catalog_path: Path, moto: str, aws_session: boto3.Session
) -> None:
    sends: dict[str, list[int]] = {}

    def throttle_twice(client: Any, region: str) -> None:
        sends[region] = fail_ec2(
            client, "DescribeInstanceTypeOfferings", 400, "RequestLimitExceeded", times=2
        )

    source = AwsSource(
        regions=(OTHER,),
        session=aws_session,
        client_factory=factory(aws_session, moto, lambda t, r: 2.0, throttle_twice),
    )
    result = take_snapshot(catalog_path, source)
    assert not result.stale and result.snapshot is not None
    assert result.snapshot.status == "ok" and result.snapshot.item_count > 0
    assert len(sends[OTHER]) >= 3  # two throttled sends, then moto answered


@pytest.mark.parametrize(
    ("status", "code", "attempts"),
    [(403, "UnauthorizedOperation", 5), (400, "RequestLimitExceeded", 2)],
)
def test_failed_read_falls_back_to_stale_snapshot_without_leaking_secrets(
    catalog_path: Path,
    moto: str,
    aws_session: boto3.Session,
    caplog: pytest.LogCaptureFixture,
    status: int,
    code: str,
    attempts: int,
) -> None:
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="catalog_db")
    t0 = datetime(2026, 3, 1, 12, 0, 0)
    good = take_snapshot(catalog_path, "catalog", now=lambda: t0, count=3)
    assert good.snapshot is not None

    def deny(client: Any, region: str) -> None:
        # A leaky upstream message: the source must not pass the key or secret through.
        message = f"denied for {FAKE_KEY_ID} / {FAKE_SECRET}"
        fail_ec2(client, "DescribeInstanceTypeOfferings", status, code, 100, message)

    source = AwsSource(
        regions=(MAIN, OTHER),
        session=aws_session,
        client_factory=factory(aws_session, moto, lambda t, r: 1.0, deny, attempts),
    )
    later = t0 + timedelta(seconds=900)
    result = take_snapshot(catalog_path, source, now=lambda: later)

    assert result.stale and result.snapshot is not None
    assert result.snapshot.snapshot_id == good.snapshot.snapshot_id
    assert result.age_s == 900.0
    assert result.attempt.status == "failed" and result.error is not None
    assert code in result.error and "DescribeInstanceTypeOfferings" in result.error
    with read_connection(catalog_path) as con:
        stored = con.execute(
            "SELECT status, error FROM inventory_snapshots WHERE snapshot_id = ?",
            [result.attempt.snapshot_id],
        ).fetchone()
        assert latest_good_snapshot(con) == good.snapshot
        everything = str(con.execute("SELECT * FROM inventory_snapshots").fetchall())
    assert stored is not None and stored[0] == "failed" and code in stored[1]
    for secret in (FAKE_SECRET, FAKE_TOKEN, FAKE_KEY_ID):
        assert secret not in everything
        assert secret not in caplog.text
        assert secret.encode() not in catalog_path.read_bytes()
    assert code in caplog.text  # the failure itself is logged, plainly


def test_no_credentials_is_a_failed_snapshot(
    catalog_path: Path, moto: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    result = take_snapshot(catalog_path, "aws", regions=["us-east-1"], endpoint_url=moto)
    assert result.snapshot is None and result.stale and result.age_s is None
    assert result.error is not None and "no AWS credentials" in result.error
    assert result.attempt.status == "failed"


def test_spot_prices_latest_per_zone_cheapest_zone(aws_session: boto3.Session) -> None:
    ec2 = aws_session.client("ec2", region_name="us-east-1", endpoint_url="http://127.0.0.1:9")
    t = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    history = [  # describe_spot_price_history's documented fields
        {
            "AvailabilityZone": "us-east-1a",
            "InstanceType": "g5.xlarge",
            "ProductDescription": "Linux/UNIX",
            "SpotPrice": "0.900000",
            "Timestamp": t - timedelta(hours=2),
        },
        {
            "AvailabilityZone": "us-east-1a",
            "InstanceType": "g5.xlarge",
            "ProductDescription": "Linux/UNIX",
            "SpotPrice": "0.417700",
            "Timestamp": t,
        },
        {
            "AvailabilityZone": "us-east-1b",
            "InstanceType": "g5.xlarge",
            "ProductDescription": "Linux/UNIX",
            "SpotPrice": "0.397000",
            "Timestamp": t,
        },
        {
            "AvailabilityZone": "us-east-1b",
            "InstanceType": "p5.48xlarge",
            "ProductDescription": "Linux/UNIX",
            "SpotPrice": "0.000000",
            "Timestamp": t,
        },
    ]
    with Stubber(ec2) as stub:
        stub.add_response("describe_spot_price_history", {"SpotPriceHistory": history})
        quotes = latest_spot_prices(ec2, ["g5.xlarge", "p5.48xlarge"], t)
    assert set(quotes) == {"g5.xlarge"}  # a zero price is not a price
    assert quotes["g5.xlarge"].price_usd_per_hr == 0.397
    assert quotes["g5.xlarge"].zone == "us-east-1b"


def test_on_demand_price_list_parsing(aws_session: boto3.Session) -> None:
    pricing = aws_session.client(
        "pricing", region_name="us-east-1", endpoint_url="http://127.0.0.1:9"
    )
    documents = [
        price_document("g5.xlarge", "us-east-1", 1.006),
        price_document("g5.xlarge", "us-east-1", 1.83, operatingSystem="Windows"),
        price_document("g5.xlarge", "us-east-1", 0.5, capacitystatus="UnusedCapacityReservation"),
        price_document("g5.12xlarge", "us-east-1", 5.672),
        price_document("g5.12xlarge", "us-east-1", 9.9, tenancy="Dedicated"),
    ]
    with Stubber(pricing) as stub:
        stub.add_response(
            "get_products",
            {"FormatVersion": "aws_v1", "PriceList": documents[:3], "NextToken": "page2"},
        )
        stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": documents[3:]})
        prices = on_demand_prices(pricing, "us-east-1", ["g5.xlarge", "g5.12xlarge"])
    assert prices == {"g5.xlarge": 1.006, "g5.12xlarge": 5.672}
