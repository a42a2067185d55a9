"""Printing result tables as a rich table, CSV or JSON (`--format`)."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from rich.console import Console
from rich.table import Table


class OutputFormat(StrEnum):
    TABLE = "table"
    CSV = "csv"
    JSON = "json"


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return value


def print_rows(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    fmt: OutputFormat,
    title: str | None = None,
) -> None:
    if fmt is OutputFormat.JSON:
        records = [{c: _plain(v) for c, v in zip(columns, row, strict=True)} for row in rows]
        sys.stdout.write(json.dumps(records, indent=2, default=str) + "\n")
    elif fmt is OutputFormat.CSV:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_plain(v) for v in row] for row in rows])
    else:
        table = Table(title=title)
        for column in columns:
            table.add_column(column)
        for row in rows:
            table.add_row(*["" if v is None else str(_plain(v)) for v in row])
        Console(width=200).print(table)
