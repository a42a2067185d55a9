"""Loading and validating request traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog_db.traces import BundledTrace, TraceError, load_trace

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def write(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(header + body, encoding="utf-8")
    return path


def test_valid_file_gives_sorted_arrivals_from_the_first_timestamp(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "2023-11-16 18:00:02.5000000,30,4\n2023-11-16 18:00:00.0000000,10,2\n",
    )
    trace = load_trace(path, model="m")
    assert [(r.arrival_s, r.input_tokens, r.output_tokens) for r in trace.requests] == [
        (0.0, 10, 2),
        (2.5, 30, 4),
    ]
    assert trace.duration_s == 2.5 and {r.model for r in trace.requests} == {"m"}
    assert trace.origin is not None and trace.origin.second == 0


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("2023-13-45 99:00:00,10,2", "bad timestamp"),
        ("2023-11-16 18:00:01,-5,2", "ContextTokens -5 must be >= 1"),
        ("2023-11-16 18:00:01,10,", "missing GeneratedTokens"),
        ("2023-11-16 18:00:01,ten,2", "not an integer"),
        ("2023-11-16 18:00:01,10", "expected 3 columns"),
    ],
)
def test_bad_rows_are_rejected_naming_file_and_line(tmp_path: Path, row: str, message: str) -> None:
    path = write(tmp_path, f"2023-11-16 18:00:00,10,2\n{row}\n")
    with pytest.raises(TraceError, match=message) as error:
        load_trace(path)
    assert f"{path}:3:" in str(error.value)


def test_header_without_required_columns_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, "1,2\n", header="TIMESTAMP,Tokens\n")
    with pytest.raises(TraceError, match="ContextTokens, GeneratedTokens"):
        load_trace(path)


def test_bundled_traces_load_by_name() -> None:
    code = load_trace("code")
    assert code.name == BundledTrace.CODE.path.stem
    assert len(code.requests) > 8000  # SOURCE.md: 8,819 data rows
    assert all(r.input_tokens >= 1 and r.output_tokens >= 1 for r in code.requests)
    assert code.requests[0].arrival_s == 0.0
    assert all(
        a.arrival_s <= b.arrival_s for a, b in zip(code.requests, code.requests[1:], strict=False)
    )
