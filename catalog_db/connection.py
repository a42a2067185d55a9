"""Opening the catalog file: short-lived connections that wait out other processes' locks."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

# DuckDB raises an IOException with this text when another process holds the file.
_LOCK_MARKERS = ("Could not set lock on file", "Conflicting lock is held")


class CatalogBusyError(RuntimeError):
    """Another process kept the catalog locked longer than the caller was willing to wait."""


def _is_lock_conflict(error: Exception) -> bool:
    return any(marker in str(error) for marker in _LOCK_MARKERS)


def open_connection(
    db_path: Path | str, *, read_only: bool, timeout_s: float = 60.0
) -> duckdb.DuckDBPyConnection:
    """Open `db_path`, retrying lock conflicts with jittered exponential backoff.

    A read-only open of a file that does not exist yet fails at once (nothing to read).
    """
    path = Path(db_path)
    if read_only and not path.exists():
        raise FileNotFoundError(f"catalog {path} does not exist; run `coral init` first")
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    delay_s = 0.01
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as error:
            if not _is_lock_conflict(error):
                raise
            if time.monotonic() + delay_s > deadline:
                raise CatalogBusyError(
                    f"catalog {path} stayed locked by another process for {timeout_s:.0f} s"
                ) from error
            time.sleep(delay_s * (0.5 + random.random()))
            delay_s = min(delay_s * 2, 1.0)


@contextmanager
def read_connection(
    db_path: Path | str, timeout_s: float = 60.0
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection, closed on exit so writers can get the lock."""
    con = open_connection(db_path, read_only=True, timeout_s=timeout_s)
    try:
        yield con
    finally:
        con.close()


@contextmanager
def write_transaction(
    db_path: Path | str, timeout_s: float = 60.0
) -> Iterator[duckdb.DuckDBPyConnection]:
    """One read-write transaction: committed on normal exit, rolled back on any error.

    Keep the body short (no solving or profiling inside): the file is locked for its duration.
    """
    con = open_connection(db_path, read_only=False, timeout_s=timeout_s)
    try:
        con.execute("BEGIN TRANSACTION")
        try:
            yield con
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
    finally:
        con.close()
