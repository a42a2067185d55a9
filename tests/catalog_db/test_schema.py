from pathlib import Path

import duckdb
import pytest

from catalog_db.connection import open_connection
from catalog_db.migrations import current_version, migrate, parse_migrations, schema_sql

TABLES = {
    "gpu_types",
    "instance_types",
    "models",
    "profiles",
    "templates",
    "inventory_snapshots",
    "workloads",
    "plans",
    "plan_assignments",
    "deployments",
    "rollout_events",
    "cost_reports",
    "sim_runs",
    "schema_version",
}
VIEWS = {
    "gpu_prices",
    "template_costs",
    "cheapest_templates",
    "plan_cost_by_gpu_region",
    "latest_inventory",
}


def _names(con: duckdb.DuckDBPyConnection, kind: str) -> set[str]:
    rows = con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_type = ?", [kind]
    ).fetchall()
    return {r[0] for r in rows}


def test_schema_creates_on_empty_db(tmp_path: Path) -> None:
    con = open_connection(tmp_path / "new.duckdb", read_only=False)
    assert migrate(con) == [m.version for m in parse_migrations(schema_sql())]
    assert _names(con, "BASE TABLE") >= TABLES
    assert _names(con, "VIEW") >= VIEWS
    assert current_version(con) == len(parse_migrations(schema_sql()))


def test_migrations_are_idempotent(tmp_path: Path) -> None:
    con = open_connection(tmp_path / "new.duckdb", read_only=False)
    migrate(con)
    before = con.execute("SELECT count(*) FROM schema_version").fetchone()
    assert migrate(con) == []
    assert con.execute("SELECT count(*) FROM schema_version").fetchone() == before


def test_parse_refuses_out_of_order_versions() -> None:
    text = "-- migration: 1 a\nSELECT 1;\n-- migration: 3 c\nSELECT 1;\n"
    with pytest.raises(ValueError, match=r"1\.\.N"):
        parse_migrations(text)


def test_new_migration_applies_on_top(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    con = open_connection(tmp_path / "new.duckdb", read_only=False)
    migrate(con)
    nxt = len(parse_migrations(schema_sql())) + 1
    extra = f"{schema_sql()}\n-- migration: {nxt} add a column\nALTER TABLE models ADD COLUMN notes VARCHAR;\n"
    monkeypatch.setattr("catalog_db.migrations.schema_sql", lambda: extra)
    assert migrate(con) == [nxt]
    assert migrate(con) == []
    con.execute("SELECT notes FROM models").fetchall()


def test_failed_migration_leaves_schema_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    con = open_connection(tmp_path / "new.duckdb", read_only=False)
    migrate(con)
    last = len(parse_migrations(schema_sql()))
    broken = f"{schema_sql()}\n-- migration: {last + 1} broken\nCREATE TABLE t2 (a INT);\nSELECT * FROM nope;\n"
    monkeypatch.setattr("catalog_db.migrations.schema_sql", lambda: broken)
    with pytest.raises(duckdb.CatalogException):
        migrate(con)
    assert current_version(con) == last
    assert "t2" not in _names(con, "BASE TABLE")
