"""Reading request traces from CSV files into pure `planning.workload.Trace` values.

The format is the Azure LLM inference trace 2023 (Patel et al., Splitwise, ISCA 2024;
CC-BY-4.0, see `data/traces/SOURCE.md`): a header row with columns `TIMESTAMP`,
`ContextTokens`, `GeneratedTokens`; timestamps like `2023-11-16 18:17:03.9799600` (naive, up
to 7 fractional digits). Any CSV with those columns loads; extra columns are ignored.

Validation refuses the whole file on the first bad row, naming file and line: a timestamp that
does not parse, a token count that is missing, not an integer, or below 1 (a request has at
least one prompt token and produces at least one token). Rows need not be sorted.
"""

from __future__ import annotations

import csv
from datetime import datetime
from enum import StrEnum
from pathlib import Path

from planning.workload import DEFAULT_MODEL, Trace, make_trace

TRACE_DIR = Path(__file__).parent / "data" / "traces"
COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


class BundledTrace(StrEnum):
    """The traces shipped with the catalog, by short name."""

    CODE = "code"
    CONV = "conv"

    @property
    def path(self) -> Path:
        return TRACE_DIR / f"AzureLLMInferenceTrace_{self.value}.csv"


class TraceError(ValueError):
    """A trace file that cannot be used; the message names the file and line."""


def resolve_trace(name_or_path: str | Path) -> Path:
    """`code` / `conv` name a bundled trace; anything else is a path to a CSV file."""
    text = str(name_or_path)
    if text in {t.value for t in BundledTrace}:
        return BundledTrace(text).path
    return Path(text)


def load_trace(path: str | Path, model: str = DEFAULT_MODEL, name: str | None = None) -> Trace:
    """Read and validate a trace CSV; arrival times are seconds from its earliest timestamp.

    `path` may also be `code` or `conv` for the bundled Azure traces. Every request is labelled
    with `model`. The trace's duration runs from the first to the last arrival.
    Raises `TraceError` (naming file and line) on a bad row, `FileNotFoundError` if absent.
    """
    file = resolve_trace(path)
    with file.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        columns = _column_indices(file, header)
        parsed = [_parse_row(file, reader.line_num, row, columns) for row in reader if row]
    if not parsed:
        raise TraceError(f"{file}: no requests after the header")
    origin = min(ts for ts, _, _ in parsed)
    rows = [((ts - origin).total_seconds(), n_in, n_out) for ts, n_in, n_out in parsed]
    return make_trace(name or file.stem, rows, origin=origin, model=model)


def _column_indices(file: Path, header: list[str] | None) -> tuple[int, int, int]:
    if header is None:
        raise TraceError(f"{file}: empty file, expected a header {','.join(COLUMNS)}")
    names = [h.strip() for h in header]
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise TraceError(f"{file}:1: header lacks column(s) {', '.join(missing)}")
    return names.index(COLUMNS[0]), names.index(COLUMNS[1]), names.index(COLUMNS[2])


def _parse_row(
    file: Path, line: int, row: list[str], columns: tuple[int, int, int]
) -> tuple[datetime, int, int]:
    if len(row) <= max(columns):
        raise TraceError(f"{file}:{line}: expected {len(COLUMNS)} columns, got {len(row)}")
    i_ts, i_in, i_out = columns
    try:
        timestamp = datetime.fromisoformat(row[i_ts].strip())
    except ValueError:
        raise TraceError(f"{file}:{line}: bad timestamp {row[i_ts]!r}") from None
    return (
        timestamp,
        _tokens(file, line, COLUMNS[1], row[i_in]),
        _tokens(file, line, COLUMNS[2], row[i_out]),
    )


def _tokens(file: Path, line: int, column: str, text: str) -> int:
    value = text.strip()
    if not value:
        raise TraceError(f"{file}:{line}: missing {column}")
    try:
        count = int(value)
    except ValueError:
        raise TraceError(f"{file}:{line}: {column} {value!r} is not an integer") from None
    if count < 1:
        raise TraceError(f"{file}:{line}: {column} {count} must be >= 1")
    return count
