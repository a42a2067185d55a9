"""The catalog source (reference prices + user counts) and snapshot bookkeeping."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from catalog_db import queries
from catalog_db.connection import read_connection
from catalog_db.inventory.snapshots import (
    latest_good_snapshot,
    list_snapshots,
    offers,
    snapshot_items,
    take_snapshot,
)
from planning.domain import Pricing


def test_catalog_source_prices_are_cheapest_zone_and_counts_are_user_set(
    catalog_path: Path,
) -> None:
    result = take_snapshot(catalog_path, "catalog", count=5, regions=["us-east-1"])
    assert result.snapshot is not None and result.snapshot.status == "ok"
    with read_connection(catalog_path) as con:
        reference = queries.instance_types(con, "aws")
        planner = offers(con, result.snapshot.snapshot_id)
        items = snapshot_items(con, result.snapshot.snapshot_id)
    expected = min(
        r.spot_usd_per_hr
        for r in reference
        if r.instance_type == "g5.xlarge" and r.region == "us-east-1" and r.spot_usd_per_hr
    )
    g5 = next(o for o in planner if o.instance_type == "g5.xlarge" and o.pricing is Pricing.SPOT)
    assert g5.price_usd_per_hr == expected and g5.available_count == 5
    assert {i.region for i in items} == {"us-east-1"}
    assert all(i.available_count == 5 and i.zone == "" for i in items)


def test_default_counts_file(catalog_path: Path) -> None:
    result = take_snapshot(catalog_path, "catalog")
    assert result.snapshot is not None
    with read_connection(catalog_path) as con:
        items = snapshot_items(con, result.snapshot.snapshot_id)
    counts = {(i.instance_type, i.available_count) for i in items if i.cloud == "aws"}
    assert ("p5.48xlarge", 1) in counts and ("g5.xlarge", 4) in counts


def test_latest_good_ignores_failed_and_ids_are_distinct(
    catalog_path: Path, tmp_path: Path
) -> None:
    t0 = datetime(2026, 1, 1, 0, 0, 0)
    first = take_snapshot(catalog_path, "catalog", now=lambda: t0, count=1)
    second = take_snapshot(catalog_path, "catalog", now=lambda: t0 + timedelta(seconds=60), count=2)
    failed = take_snapshot(
        catalog_path, "file", now=lambda: t0 + timedelta(seconds=120), path=tmp_path / "missing.csv"
    )
    assert first.attempt.snapshot_id != second.attempt.snapshot_id
    assert failed.stale and failed.age_s == 60.0
    assert failed.snapshot == second.snapshot
    with read_connection(catalog_path) as con:
        assert latest_good_snapshot(con) == second.snapshot
        assert [s.status for s in list_snapshots(con)] == ["failed", "ok", "ok"]
        view = con.execute("SELECT DISTINCT snapshot_id FROM latest_inventory").fetchall()
    assert view == [(second.attempt.snapshot_id,)]
