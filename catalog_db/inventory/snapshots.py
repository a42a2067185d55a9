"""Inventory snapshots: store each read with its provenance, fall back to the last good one.

`take_snapshot` is what replanning calls. A read that fails (no credentials, access denied,
throttling after botocore's retries, a timeout, a bad file) never raises: a 'failed' row records
the plain error, and the result points at the last good snapshot, marked stale with its age.
Stored errors are redacted of anything shaped like an AWS access key id; sources never put
credentials in messages (aws_source.plain_error).

`offers` is the planner's view of a snapshot (see its docstring for the aggregation rule).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
from botocore.exceptions import BotoCoreError, ClientError

from catalog_db.connection import read_connection, write_transaction
from catalog_db.inventory.aws_source import plain_error, redact
from catalog_db.inventory.base_source import (
    InventoryItem,
    InventoryRead,
    InventoryReadError,
    InventorySource,
    SourceName,
    make_source,
)
from catalog_db.inventory.gpu_names import load_reference
from planning.domain import Offer, Pricing

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """One `inventory_snapshots` row. `taken_at` is UTC (naive, as DuckDB stores it)."""

    snapshot_id: str
    source: str
    taken_at: datetime
    regions: tuple[str, ...]
    status: str  # ok | partial | failed
    error: str | None
    item_count: int


@dataclass(frozen=True, slots=True)
class SnapshotResult:
    """What a replan should plan with.

    `snapshot` is the snapshot to use (None when the read failed and no good one exists);
    `stale` is True when it is an older snapshot because this read failed; `age_s` is its age
    in seconds at `now`; `error` says plainly why this read failed; `attempt` is the row this
    read wrote (ok, partial or failed).
    """

    snapshot: SnapshotInfo | None
    stale: bool
    age_s: float | None
    error: str | None
    attempt: SnapshotInfo


def utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def snapshot_id_for(source: str, taken_at: datetime, items: tuple[InventoryItem, ...]) -> str:
    """`<source>-<UTC time to µs>-<8 hex of the content>`: sortable, and distinct for two reads
    at the same instant with different content."""
    digest = hashlib.sha256(repr(items).encode()).hexdigest()[:8]
    return f"{source}-{taken_at:%Y%m%dT%H%M%S%f}-{digest}"


_SNAPSHOT_COLUMNS = (
    "s.snapshot_id, s.source, s.taken_at, s.regions, s.status, s.error, "
    "(SELECT count(*) FROM inventory_items i WHERE i.snapshot_id = s.snapshot_id)"
)


def _info(row: tuple[Any, ...]) -> SnapshotInfo:
    sid, source, taken_at, regions, status, error, count = row
    return SnapshotInfo(sid, source, taken_at, tuple(regions or ()), status, error, int(count))


def snapshot_info(con: duckdb.DuckDBPyConnection, snapshot_id: str) -> SnapshotInfo:
    row = con.execute(
        f"SELECT {_SNAPSHOT_COLUMNS} FROM inventory_snapshots s WHERE s.snapshot_id = ?",
        [snapshot_id],
    ).fetchone()
    if row is None:
        raise KeyError(f"no inventory snapshot {snapshot_id!r}; see `coral inventory list`")
    return _info(row)


def latest_good_snapshot(con: duckdb.DuckDBPyConnection) -> SnapshotInfo | None:
    """The newest snapshot whose status is ok or partial (the `latest_inventory` view's rule)."""
    row = con.execute(
        f"SELECT {_SNAPSHOT_COLUMNS} FROM inventory_snapshots s "
        "WHERE s.status IN ('ok', 'partial') ORDER BY s.taken_at DESC, s.snapshot_id DESC LIMIT 1"
    ).fetchone()
    return None if row is None else _info(row)


def list_snapshots(con: duckdb.DuckDBPyConnection, limit: int = 20) -> tuple[SnapshotInfo, ...]:
    rows = con.execute(
        f"SELECT {_SNAPSHOT_COLUMNS} FROM inventory_snapshots s "
        "ORDER BY s.taken_at DESC, s.snapshot_id DESC LIMIT ?",
        [limit],
    ).fetchall()
    return tuple(_info(row) for row in rows)


_ITEM_COLUMNS = (
    "cloud, region, zone, instance_type, pricing, gpu_type, gpu_count, price_usd_per_hr, "
    "available_count, known_gpu, provenance"
)


def snapshot_items(con: duckdb.DuckDBPyConnection, snapshot_id: str) -> tuple[InventoryItem, ...]:
    rows = con.execute(
        f"SELECT {_ITEM_COLUMNS} FROM inventory_items WHERE snapshot_id = ? "
        "ORDER BY cloud, region, zone, instance_type, pricing",
        [snapshot_id],
    ).fetchall()
    return tuple(
        InventoryItem(
            cloud=r[0],
            region=r[1],
            zone=r[2],
            instance_type=r[3],
            pricing=Pricing(r[4]),
            gpu_type=r[5],
            gpu_count=int(r[6]),
            price_usd_per_hr=r[7],
            available_count=int(r[8]),
            known_gpu=bool(r[9]),
            provenance=r[10],
        )
        for r in rows
    )


def offers(con: duckdb.DuckDBPyConnection, snapshot_id: str) -> tuple[Offer, ...]:
    """The planner's view of a snapshot: one Offer per (cloud, region, instance type, pricing).

    Zones are aggregated into their region: available machines are summed over the zones
    (a source writes per-zone rows only when its counts are per zone; the aws and catalog
    sources write one regional row), and the price is the cheapest zone's (optimistic when
    zones differ in price). Rows whose GPU is unknown to the catalog or that have no price are
    left out: the planner cannot use them. Offers with zero machines are kept (the planner
    then knows the type exists but is exhausted).
    """
    rows = con.execute(
        "SELECT cloud, region, instance_type, pricing, gpu_type, gpu_count, "
        "min(price_usd_per_hr), sum(available_count) FROM inventory_items "
        "WHERE snapshot_id = ? AND known_gpu AND gpu_type IS NOT NULL "
        "AND price_usd_per_hr IS NOT NULL "
        "GROUP BY ALL ORDER BY cloud, region, instance_type, pricing",
        [snapshot_id],
    ).fetchall()
    return tuple(
        Offer(cloud, region, itype, Pricing(pricing), gpu, int(gpus), float(price), int(count))
        for cloud, region, itype, pricing, gpu, gpus, price, count in rows
    )


def _params_json(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def store_snapshot(
    db_path: Path | str, read: InventoryRead, taken_at: datetime, timeout_s: float = 60.0
) -> SnapshotInfo:
    """Write the snapshot row and all its items in one transaction."""
    status = "partial" if read.warnings else "ok"
    error = redact("; ".join(read.warnings), ())[:2000] if read.warnings else None
    sid = snapshot_id_for(read.source.value, taken_at, read.items)
    with write_transaction(db_path, timeout_s=timeout_s) as con:
        con.execute(
            "INSERT INTO inventory_snapshots VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                sid,
                read.source.value,
                taken_at,
                list(read.regions),
                status,
                error,
                _params_json(read.params),
            ],
        )
        con.executemany(
            "INSERT INTO inventory_items VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                [
                    sid,
                    i.cloud,
                    i.region,
                    i.zone,
                    i.instance_type,
                    i.pricing.value,
                    i.gpu_type,
                    i.gpu_count,
                    i.price_usd_per_hr,
                    i.available_count,
                    i.known_gpu,
                    i.provenance,
                ]
                for i in read.items
            ],
        )
    return SnapshotInfo(
        sid, read.source.value, taken_at, read.regions, status, error, len(read.items)
    )


def store_failure(
    db_path: Path | str,
    source: str,
    regions: tuple[str, ...],
    error: str,
    taken_at: datetime,
    timeout_s: float = 60.0,
) -> SnapshotInfo:
    """Record a failed read: a snapshot row with status 'failed', the plain error, no items."""
    message = redact(error, ())[:2000]
    sid = snapshot_id_for(source, taken_at, ())
    with write_transaction(db_path, timeout_s=timeout_s) as con:
        con.execute(
            "INSERT INTO inventory_snapshots VALUES (?, ?, ?, ?, 'failed', ?, ?)",
            [sid, source, taken_at, list(regions), message, _params_json({})],
        )
    return SnapshotInfo(sid, source, taken_at, regions, "failed", message, 0)


def _read(source: InventorySource, db_path: Path | str, timeout_s: float) -> InventoryRead:
    """Load the catalog reference (lock released at once), then let the source read."""
    with read_connection(db_path, timeout_s=timeout_s) as con:
        reference = load_reference(con)
    return source.read(reference)


def _plain(error: Exception) -> str:
    if isinstance(error, InventoryReadError):
        return str(error)
    if isinstance(error, ClientError | BotoCoreError):
        return plain_error(error)
    return f"{type(error).__name__}: {error}"


def take_snapshot(
    db_path: Path | str,
    source: SourceName | str | InventorySource,
    *,
    now: Callable[[], datetime] = utc_now,
    timeout_s: float = 60.0,
    **source_kwargs: Any,
) -> SnapshotResult:
    """Read `source` (a name from the registry, built with `source_kwargs`, or a built source)
    and store the snapshot; on a failed read, store the failure and fall back (see module)."""
    built = make_source(source, **source_kwargs) if isinstance(source, str) else source
    regions = tuple(getattr(built, "regions", None) or ())
    taken_at = now()
    try:
        read = _read(built, db_path, timeout_s)
    except (InventoryReadError, ClientError, BotoCoreError, OSError, TimeoutError) as error:
        return _fall_back(db_path, built.name.value, regions, _plain(error), now, timeout_s)
    info = store_snapshot(db_path, read, taken_at, timeout_s)
    if read.warnings:
        log.warning("inventory snapshot %s is partial: %s", info.snapshot_id, info.error)
    return SnapshotResult(snapshot=info, stale=False, age_s=0.0, error=None, attempt=info)


def _fall_back(
    db_path: Path | str,
    source: str,
    regions: tuple[str, ...],
    error: str,
    now: Callable[[], datetime],
    timeout_s: float,
) -> SnapshotResult:
    failed = store_failure(db_path, source, regions, error, now(), timeout_s)
    with read_connection(db_path, timeout_s=timeout_s) as con:
        good = latest_good_snapshot(con)
    age_s = None if good is None else (now() - good.taken_at).total_seconds()
    if good is None:
        log.warning("inventory read failed and no earlier snapshot exists: %s", failed.error)
    else:
        log.warning(
            "inventory read failed; using snapshot %s, %.0f s old: %s",
            good.snapshot_id,
            age_s,
            failed.error,
        )
    return SnapshotResult(
        snapshot=good, stale=True, age_s=age_s, error=failed.error, attempt=failed
    )
