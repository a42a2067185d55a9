"""Creating, migrating and seeding a catalog file (what `coral init` does)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from catalog_db.connection import open_connection, write_transaction
from catalog_db.migrations import current_version, migrate
from catalog_db.queries import table_counts
from catalog_db.reference import read_reference, write_reference


@dataclass(frozen=True, slots=True)
class InitSummary:
    schema_version: int
    migrations_applied: tuple[int, ...]
    table_counts: dict[str, int]


def init_catalog(
    db_path: Path | str, data_dir: Path | None = None, timeout_s: float = 60.0
) -> InitSummary:
    """Migrate `db_path` to the latest schema and upsert the reference data.

    The reference files are validated before the catalog is opened for writing, so a bad
    row leaves the catalog exactly as it was.
    """
    data = read_reference(data_dir)
    con = open_connection(db_path, read_only=False, timeout_s=timeout_s)
    try:
        applied = migrate(con)
    finally:
        con.close()
    with write_transaction(db_path, timeout_s=timeout_s) as con:
        write_reference(con, data)
        return InitSummary(current_version(con), tuple(applied), table_counts(con))
