"""The HTML reports in a real headless Chromium: they render, have their charts, log no errors.

One Chromium (fresh profile) opens every page once, in a module fixture; the tests assert on
what it saw. Skips with the reason when Debian's chromium is absent; `.ci/run` installs it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog_db.reports_io import build_history_report, build_plan_report
from tests.reports import catalog_rows as rows
from tests.reports.headless import PageResult, chromium_path, load_pages

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
    "lines": "document.querySelectorAll('.js-plotly-plot g.trace.scatter').length",
    "h1": "document.querySelector('h1') && document.querySelector('h1').textContent",
}
# loaded, and every chart div has been drawn by plotly (its svg exists)
READY = (
    "document.readyState === 'complete' && Array.from(document.querySelectorAll("
    "'.plotly-graph-div')).every(d => d.querySelector('svg.main-svg'))"
)
BAD_PAGE = (
    "<!DOCTYPE html><html><body><script>console.error('boom-console');"
    "throw new Error('boom-throw');</script></body></html>"
)


def _fresh_catalog(seeded: Path, path: Path) -> Path:
    path.write_bytes(seeded.read_bytes())
    return path


@pytest.fixture(scope="module")
def pages(
    seeded_template_db: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, PageResult]:
    tmp = tmp_path_factory.mktemp("browser")
    full_db = _fresh_catalog(seeded_template_db, tmp / "full.duckdb")
    rows.seed_plan(full_db)
    nosim_db = _fresh_catalog(seeded_template_db, tmp / "nosim.duckdb")
    rows.seed_plan(nosim_db, with_sims=False, with_baselines=False)
    empty_db = _fresh_catalog(seeded_template_db, tmp / "empty.duckdb")
    (tmp / "bad.html").write_text(BAD_PAGE, encoding="utf-8")
    paths = {
        "full": build_plan_report(full_db, rows.PLAN_ID, tmp / "full").html_path,
        "history": build_history_report(full_db, "3650d", tmp / "full").html_path,
        "nosim": build_plan_report(nosim_db, rows.PLAN_ID, tmp / "nosim").html_path,
        "empty": build_history_report(empty_db, "7d", tmp / "empty").html_path,
        "bad": tmp / "bad.html",
    }
    results = load_pages(list(paths.values()), PROBES, READY, timeout_s=120)
    return dict(zip(paths, results, strict=True))


@pytest.mark.parametrize("name", ["full", "history", "nosim", "empty"])
def test_report_page_logs_no_console_errors(pages: dict[str, PageResult], name: str):
    assert pages[name].errors == []


def test_plan_report_has_its_four_charts_drawn(pages: dict[str, PageResult]):
    full = pages["full"].values
    assert full["plotly"] == "object"  # plotly.js came inline: no network here
    assert full["charts"] == 4
    assert full["rendered"] >= 4
    assert full["bars"] > 0 and full["lines"] > 0
    assert full["tables"] >= 4
    assert rows.PLAN_ID in full["h1"]


def test_plan_without_simulation_renders_and_says_why(pages: dict[str, PageResult]):
    nosim = pages["nosim"].values
    assert nosim["charts"] == 2  # cost by GPU type, cost per model
    assert nosim["rendered"] >= 2
    assert any("No simulation run" in text for text in nosim["no_data"])


def test_history_report_has_its_charts_and_empty_history_says_so(pages: dict[str, PageResult]):
    assert pages["history"].values["charts"] == 3
    assert pages["history"].values["rendered"] >= 3
    empty = pages["empty"].values
    assert empty["charts"] == 0
    assert any("nothing to report" in text for text in empty["no_data"])


def test_the_browser_check_catches_console_errors(pages: dict[str, PageResult]):
    """Negative control: a page that logs an error and throws is caught, not passed."""
    assert any("boom-console" in e for e in pages["bad"].console_errors)
    assert any("boom-throw" in e for e in pages["bad"].exceptions)
