"""The profiles table: bulk upsert, typed reads, resume counts, all-or-nothing batches."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from catalog_db.connection import read_connection, write_transaction
from catalog_db.profiles import (
    duplicate_keys,
    read_points,
    stage_point_counts,
    upsert_points,
)
from planning.domain import Dtype, Phase, ProfilePoint


def point(batch: int, seq: int, latency: float = 1.0, phase: Phase = Phase.DECODE) -> ProfilePoint:
    return ProfilePoint(
        model="m", gpu_type="H100-SXM", tp=2, num_layers=16, phase=phase, dtype=Dtype.BF16,
        batch_size=batch, seq_len_tokens=seq, latency_ms=latency, backend="analytic",
        backend_version="v1", weights_gib=7.5, kv_gib_per_token=6e-5, max_kv_tokens=123_456,
    )  # fmt: skip


def test_round_trip_returns_domain_points(catalog_path: Path) -> None:
    points = [point(b, s, b * s / 100) for b in (1, 8) for s in (128, 1024)]
    with write_transaction(catalog_path) as con:
        assert upsert_points(con, points) == 4
    with read_connection(catalog_path) as con:
        back = read_points(con, model="m", gpu_type="H100-SXM", phase=Phase.DECODE)
        assert read_points(con, model="m", phase="prefill") == ()
    assert sorted(back, key=lambda p: (p.batch_size, p.seq_len_tokens)) == points
    assert back[0].phase is Phase.DECODE and back[0].max_kv_tokens == 123_456


def test_upsert_replaces_and_never_duplicates(catalog_path: Path) -> None:
    with write_transaction(catalog_path) as con:
        upsert_points(con, [point(1, 128, 1.0)])
    with write_transaction(catalog_path) as con:
        upsert_points(con, [point(1, 128, 2.0), point(2, 128, 3.0)])
    with read_connection(catalog_path) as con:
        latencies = {p.batch_size: p.latency_ms for p in read_points(con, model="m")}
        assert duplicate_keys(con) == 0
        counts = stage_point_counts(con)
    assert latencies == {1: 2.0, 2: 3.0}
    assert counts == {("m", "H100-SXM", 2, 16, "decode", "bf16", "analytic", "v1"): 2}


def test_a_bad_batch_writes_nothing(catalog_path: Path) -> None:
    bad = replace(point(2, 128), latency_ms=-1.0)  # violates CHECK (latency_ms > 0)
    with pytest.raises(duckdb.Error), write_transaction(catalog_path) as con:
        upsert_points(con, [point(1, 128), bad])
    with read_connection(catalog_path) as con:
        assert read_points(con, model="m") == ()
