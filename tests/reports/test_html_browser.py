"""The HTML reports in a real headless Chromium: they render, have their charts, log no errors.

Skips (with the reason) when Debian's chromium is not installed; `.ci/run` installs it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog_db.reports_io import build_history_report, build_plan_report
from tests.reports import catalog_rows as rows
from tests.reports.headless import chromium_path, load_pages

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        chromium_path() is None,
        reason="Debian's chromium is not installed (apt-get install -y chromium); "
        "the HTML report is checked in a real headless browser",
    ),
]

PROBES = {
    "charts": "document.querySelectorAll('.plotly-graph-div').length",
    "rendered": "document.querySelectorAll('.js-plotly-plot svg.main-svg').length",
    "plotly": "typeof window.Plotly",
    "tables": "document.querySelectorAll('table.report-table').length",
    "no_data": "Array.from(document.querySelectorAll('.no-data')).map(e => e.textContent)",
    "bars": "document.querySelectorAll('.js-plotly-plot g.trace.bars path').length",
    "h1": "document.querySelector('h1') && document.querySelector('h1').textContent",
}
# every chart div has been drawn by plotly (its svg exists)
READY = (
    "document.readyState === 'complete' && Array.from(document.querySelectorAll('.plotly-graph-div'))"
    ".every(d => d.querySelector('svg.main-svg'))"
)


def test_reports_render_with_charts_and_no_console_errors(
    catalog_path: Path, seeded_template_db: Path, tmp_path: Path
):
    rows.seed_plan(catalog_path)
    full = build_plan_report(catalog_path, rows.PLAN_ID, tmp_path / "out").html_path
    history = build_history_report(catalog_path, "3650d", tmp_path / "out").html_path
    empty_db = tmp_path / "empty.duckdb"  # schema and reference data, no plan at all
    empty_db.write_bytes(seeded_template_db.read_bytes())
    empty = build_history_report(empty_db, "7d", tmp_path / "empty").html_path
    nosim_db = tmp_path / "nosim.duckdb"  # the same plan without simulations or baselines
    nosim_db.write_bytes(seeded_template_db.read_bytes())
    rows.seed_plan(nosim_db, with_sims=False, with_baselines=False)
    nosim = build_plan_report(nosim_db, rows.PLAN_ID, tmp_path / "nosim").html_path

    results = load_pages([full, nosim, history, empty], PROBES, READY)
    for path, result in zip([full, nosim, history, empty], results, strict=True):
        assert result.errors == [], f"{path}: {result.errors}"

    full_r, nosim_r, history_r, empty_r = results
    assert full_r.values["plotly"] == "object"
    assert full_r.values["charts"] == 4
    assert full_r.values["rendered"] >= 4
    assert full_r.values["bars"] > 0
    assert full_r.values["tables"] >= 4
    assert rows.PLAN_ID in full_r.values["h1"]

    assert nosim_r.values["charts"] == 2  # cost by GPU type, cost per model
    assert nosim_r.values["rendered"] >= 2
    assert any("No simulation run" in text for text in nosim_r.values["no_data"])

    assert history_r.values["charts"] == 3
    assert history_r.values["rendered"] >= 3

    assert empty_r.values["charts"] == 0
    assert any("nothing to report" in text for text in empty_r.values["no_data"])


def test_the_browser_check_catches_console_errors(tmp_path: Path):
    """Negative control: a page that logs an error and throws is reported, not passed."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><body><script>console.error('boom-console');"
        "throw new Error('boom-throw');</script></body></html>",
        encoding="utf-8",
    )
    (result,) = load_pages([page], {"title": "document.title"}, "true")
    assert any("boom-console" in e for e in result.console_errors)
    assert any("boom-throw" in e for e in result.exceptions)
