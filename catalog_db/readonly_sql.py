"""Users' SQL over the catalog: only statements that read, on a read-only connection.

A read-only DuckDB connection already refuses writes to the catalog, but some statements
still act outside it (COPY ... TO writes files, ATTACH opens other databases, INSTALL/LOAD
fetch and run extensions). Only SELECT-like statements pass; anything else is refused with
the statement type named.
"""

from __future__ import annotations

import duckdb

_ALLOWED = {"SELECT", "EXPLAIN"}


class WriteRefusedError(PermissionError):
    """The SQL contains a statement that would write or act outside the catalog."""


def check_read_only(sql: str) -> None:
    """Raise WriteRefusedError unless every statement in `sql` only reads."""
    statements = duckdb.extract_statements(sql)
    if not statements:
        raise WriteRefusedError("no SQL statement given")
    for statement in statements:
        kind = statement.type.name.removesuffix("_STATEMENT")
        if kind not in _ALLOWED:
            raise WriteRefusedError(
                f"`coral sql` is read-only: {kind} statements are refused "
                f"({statement.query.strip()[:60]!r})"
            )
        if kind == "EXPLAIN" and "ANALYZE" in statement.query.upper():
            raise WriteRefusedError("`coral sql` is read-only: EXPLAIN ANALYZE runs its statement")


def run_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[tuple]]:
    """Check, then run `sql`; returns column names and all rows (drained, per DuckDB 2.0)."""
    check_read_only(sql)
    result = con.execute(sql)
    columns = [d[0] for d in result.description] if result.description else []
    return columns, result.fetchall()
