from pathlib import Path

import pytest

from catalog_db.connection import read_connection
from catalog_db.readonly_sql import WriteRefusedError, check_read_only, run_read_only

WRITES = [
    "INSERT INTO models (model) VALUES ('x')",
    "UPDATE gpu_types SET memory_gib = 1",
    "DELETE FROM gpu_types",
    "DROP TABLE gpu_types",
    "CREATE TABLE t (a INT)",
    "ATTACH 'other.duckdb' AS other",
    "COPY gpu_types TO 'out.csv'",
    "COPY (SELECT 1) TO 'out.parquet' (FORMAT parquet)",
    "INSTALL httpfs",
    "LOAD httpfs",
    "EXPORT DATABASE 'dump'",
    "SET threads = 1",
    "CHECKPOINT",
    "SELECT 1; DROP TABLE models",
    "EXPLAIN ANALYZE SELECT 1",
    "",
]


@pytest.mark.parametrize("sql", WRITES)
def test_writes_are_refused(sql: str) -> None:
    with pytest.raises(WriteRefusedError):
        check_read_only(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) FROM gpu_types",
        "FROM models LIMIT 1",
        "SHOW TABLES",
        "DESCRIBE models",
        "WITH a AS (SELECT 1 AS x) SELECT x FROM a",
        "EXPLAIN SELECT * FROM models",
        "SELECT * FROM gpu_prices",
    ],
)
def test_reads_run(catalog_path: Path, sql: str) -> None:
    with read_connection(catalog_path) as con:
        columns, rows = run_read_only(con, sql)
    assert columns and rows


def test_refused_copy_writes_no_file(catalog_path: Path, tmp_path: Path) -> None:
    target = tmp_path / "leak.csv"
    with read_connection(catalog_path) as con, pytest.raises(WriteRefusedError):
        run_read_only(con, f"COPY gpu_types TO '{target}'")
    assert not target.exists()
