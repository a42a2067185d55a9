"""`cost-report` flow (daily): the over-time cost and SLO report as catalog rows and artifacts."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.tasks import history_report_task, publish_report_task


@flow(name="cost-report", log_prints=True)
def cost_report(
    since: str = "1d", db: Path = Path("coral.duckdb"), out_dir: Path = Path("out")
) -> str:
    """Report cost, savings and attainment over the last `since` (e.g. 1d, 7d); returns the HTML path."""
    report = history_report_task(db, since, out_dir)
    publish_report_task(report, key="cost-report")
    print(f"report {report.report_id}: {report.html_path}")
    return str(report.html_path)
