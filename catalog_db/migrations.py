"""Forward migrations read from the one DDL file, `schema.sql`.

The file is split on marker lines `-- migration: <version> <description>`; every section whose
version is above the catalog's current one runs in its own transaction, then its version is
recorded in `schema_version`. Re-running is a no-op.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import duckdb

_MARKER = re.compile(r"^-- migration: (\d+) (.+)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    description: str
    sql: str


def schema_sql() -> str:
    return resources.files("catalog_db").joinpath("schema.sql").read_text(encoding="utf-8")


def parse_migrations(text: str) -> tuple[Migration, ...]:
    """Split the DDL file into ordered migrations; versions must be 1, 2, 3, ..."""
    marks = list(_MARKER.finditer(text))
    migrations = []
    for index, mark in enumerate(marks):
        end = marks[index + 1].start() if index + 1 < len(marks) else len(text)
        migrations.append(
            Migration(int(mark.group(1)), mark.group(2).strip(), text[mark.end() : end])
        )
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"schema.sql migration versions must be 1..N in order, got {versions}")
    return tuple(migrations)


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
    ).fetchone()
    if not exists or exists[0] == 0:
        return 0
    row = con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
    return int(row[0]) if row else 0


def migrate(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Apply pending migrations on a read-write connection; returns the versions applied."""
    applied = []
    for migration in parse_migrations(schema_sql()):
        if migration.version <= current_version(con):
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(migration.sql)
            con.execute(
                "INSERT INTO schema_version (version, description) VALUES (?, ?)",
                [migration.version, migration.description],
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        applied.append(migration.version)
    return applied
