import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli.main import app

runner = CliRunner()


def test_init_then_sql_counts_gpus(tmp_path: Path) -> None:
    db = tmp_path / "c.duckdb"
    result = runner.invoke(app, ["--db", str(db), "init"])
    assert result.exit_code == 0, result.output
    assert "gpu_types" in result.output
    result = runner.invoke(
        app, ["--db", str(db), "sql", "select count(*) AS n from gpu_types", "-f", "json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["n"] >= 20


@pytest.mark.parametrize("sql", ["DROP TABLE models", "COPY models TO 'x.csv'", "INSTALL httpfs"])
def test_sql_refuses_writes_with_nonzero_exit(catalog_path: Path, sql: str) -> None:
    result = runner.invoke(app, ["--db", str(catalog_path), "sql", sql])
    assert result.exit_code == 3
    assert "read-only" in result.output


def test_sql_error_is_reported_without_traceback(catalog_path: Path) -> None:
    result = runner.invoke(app, ["--db", str(catalog_path), "sql", "SELECT nope FROM models"])
    assert result.exit_code == 1
    assert "SQL error" in result.output


@pytest.mark.parametrize(
    ("listing", "expected"),
    [("gpus", "H100-SXM"), ("models", "Qwen/Qwen3-8B"), ("instances", "p5.48xlarge")],
)
def test_catalog_listings_in_every_format(catalog_path: Path, listing: str, expected: str) -> None:
    for fmt in ("table", "csv", "json"):
        result = runner.invoke(
            app, ["--db", str(catalog_path), "catalog", listing, "--format", fmt]
        )
        assert result.exit_code == 0, result.output
        assert expected in result.output


def test_csv_format_is_parseable(catalog_path: Path) -> None:
    result = runner.invoke(app, ["--db", str(catalog_path), "catalog", "gpus", "-f", "csv"])
    header = result.stdout.splitlines()[0].split(",")
    assert header[0] == "gpu_type" and len(result.stdout.splitlines()) >= 21


def test_db_from_environment(catalog_path: Path) -> None:
    result = runner.invoke(
        app, ["sql", "select 1 AS one", "-f", "json"], env={"CORAL_DB": str(catalog_path)}
    )
    assert result.exit_code == 0 and json.loads(result.stdout) == [{"one": 1}]


def test_sql_on_missing_catalog_says_init(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--db", str(tmp_path / "none.duckdb"), "sql", "select 1"])
    assert result.exit_code == 1 and "coral init" in result.output
