"""`coral report` end to end over a real catalog (CliRunner, no browser)."""

from __future__ import annotations

from pathlib import Path

import duckdb
from typer.testing import CliRunner

from flows.cli.main import app
from tests.reports import catalog_rows as rows

runner = CliRunner()


def test_report_plan_writes_html_csv_and_a_catalog_row(catalog_path: Path, tmp_path: Path) -> None:
    rows.seed_plan(catalog_path)
    out = tmp_path / "reports"
    args = ["--db", str(catalog_path), "report", "--plan", rows.PLAN_ID, "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "total_usd_per_hr" in result.output
    html = next(out.glob("*/report.html"))
    assert html.stat().st_size > 0
    assert {p.name for p in html.parent.glob("*.csv")} >= {"models.csv", "breakdown.csv"}
    with duckdb.connect(str(catalog_path), read_only=True) as con:
        found = con.execute("SELECT plan_id, html_path FROM cost_reports").fetchall()
    assert found == [(rows.PLAN_ID, str(html.resolve()))]


def test_report_since_on_an_empty_catalog_says_so(catalog_path: Path, tmp_path: Path) -> None:
    args = ["--db", str(catalog_path), "report", "--since", "7d", "--out", str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "nothing to report" in result.output


def test_report_needs_exactly_one_of_plan_or_since(catalog_path: Path) -> None:
    result = runner.invoke(app, ["--db", str(catalog_path), "report"])
    assert result.exit_code == 2
    both = ["--db", str(catalog_path), "report", "--plan", "x", "--since", "7d"]
    assert runner.invoke(app, both).exit_code == 2


def test_report_unknown_plan_and_bad_period_exit_1(catalog_path: Path, tmp_path: Path) -> None:
    base = ["--db", str(catalog_path), "report", "--out", str(tmp_path)]
    missing = runner.invoke(app, [*base, "--plan", "nope"])
    assert missing.exit_code == 1 and "no plan 'nope'" in missing.output
    bad = runner.invoke(app, [*base, "--since", "last tuesday"])
    assert bad.exit_code == 1 and "cannot read --since" in bad.output
