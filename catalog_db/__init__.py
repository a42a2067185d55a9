"""The DuckDB catalog: schema, migrations, reference data and typed queries.

Concurrency rule (DuckDB): one process may hold a read-write connection, or many processes
read-only ones, never both. Open write connections only for one short transaction
(`write_transaction`); readers use `read_connection`. Both retry lock conflicts with backoff.
"""

from catalog_db.connection import read_connection, write_transaction
from catalog_db.migrations import migrate

__all__ = ["migrate", "read_connection", "write_transaction"]
