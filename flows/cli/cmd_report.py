"""`coral report --plan ID | --since 7d [--open] [--out DIR]`: cost and SLO reports."""

from __future__ import annotations

import webbrowser
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from catalog_db.connection import CatalogBusyError
from catalog_db.reports_io import ReportResult, build_history_report, build_plan_report
from flows.cli.output import OutputFormat, print_rows
from flows.settings import Settings
from reports.markdown import fmt

err = Console(stderr=True)


def _print_result(result: ReportResult, name: str) -> None:
    table = result.tables[name]
    if table.rows:
        shown = [[fmt(v, 6) if isinstance(v, float) else v for v in row] for row in table.rows]
        print_rows(list(table.columns), shown, OutputFormat.TABLE, title=name)
    else:
        typer.echo(f"{name}: no rows")
    typer.echo(f"report {result.report_id}")
    typer.echo(f"html: {result.html_path}")
    for stem, path in sorted(result.csv_paths.items()):
        typer.echo(f"csv:  {path}  (parquet: {result.parquet_paths[stem].name})")


def report(
    ctx: typer.Context,
    plan: Annotated[str | None, typer.Option("--plan", help="plan id: per-plan report")] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="history since e.g. 7d, 12h, 2w or an ISO date")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="output folder (default: settings out_dir/reports)")
    ] = None,
    open_browser: Annotated[bool, typer.Option("--open", help="open the HTML report")] = False,
) -> None:
    """Cost, savings vs baselines and SLO attainment of one plan, or of every replan since."""
    settings: Settings = ctx.obj
    if (plan is None) == (since is None):
        err.print("[red]give exactly one of --plan ID or --since PERIOD[/red]")
        raise typer.Exit(2)
    out_dir = out or settings.out_dir / "reports"
    try:
        if plan is not None:
            result = build_plan_report(settings.db, plan, out_dir, settings.db_lock_timeout_s)
            _print_result(result, "summary")
        else:
            assert since is not None
            result = build_history_report(
                settings.db, since, out_dir, timeout_s=settings.db_lock_timeout_s
            )
            if result.empty:
                typer.echo("no Coral plan was in effect in this period: nothing to report")
            _print_result(result, "days")
    except (KeyError, ValueError, FileNotFoundError, CatalogBusyError) as error:
        err.print(f"[red]error:[/red] {error.args[0] if error.args else error}")
        raise typer.Exit(1) from None
    if open_browser:
        webbrowser.open(result.html_path.as_uri())


def register(app: typer.Typer) -> None:
    app.command()(report)
