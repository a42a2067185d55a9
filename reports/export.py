"""Writing report tables as CSV and Parquet files (one file per table and format)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from reports.tables import Table


@dataclass(frozen=True, slots=True)
class ExportedFiles:
    """Paths written, keyed by table name."""

    csv: Mapping[str, Path]
    parquet: Mapping[str, Path]


def table_frame(table: Table) -> pd.DataFrame:
    """A DataFrame of the table; columns of only None become nullable objects."""
    return pd.DataFrame.from_records(list(table.rows), columns=list(table.columns))


def export_tables(tables: Mapping[str, Table], out_dir: Path) -> ExportedFiles:
    """Write `<name>.csv` and `<name>.parquet` under `out_dir` for every table."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_paths: dict[str, Path] = {}
    parquet_paths: dict[str, Path] = {}
    for name, table in tables.items():
        frame = table_frame(table)
        csv_paths[name] = out_dir / f"{name}.csv"
        frame.to_csv(csv_paths[name], index=False)
        parquet_paths[name] = out_dir / f"{name}.parquet"
        _parquet_safe(frame).to_parquet(parquet_paths[name], index=False)
    return ExportedFiles(csv_paths, parquet_paths)


def _parquet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Mixed-type object columns (e.g. the summary's `value`) are written as strings."""
    fixed = frame.copy()
    for column in fixed.columns:
        if fixed[column].dtype == object:
            types = {type(v) for v in fixed[column] if v is not None}
            if len(types) > 1:
                fixed[column] = [None if v is None else str(v) for v in fixed[column]]
    return fixed
