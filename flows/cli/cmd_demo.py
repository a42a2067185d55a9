"""`coral demo`: the whole pipeline on embedded defaults (what `make demo` runs)."""

from __future__ import annotations

import typer

from catalog_db.setup import init_catalog
from flows.cli.output import OutputFormat, print_rows
from flows.settings import Settings


def demo(ctx: typer.Context) -> None:
    """Create the catalog, load reference data and print a summary.

    Later stages (profile, templates, inventory, replan, simulate, dry-run rollout, report)
    are added here as they land; see README "What make demo does".
    """
    settings: Settings = ctx.obj
    summary = init_catalog(settings.db, timeout_s=settings.db_lock_timeout_s)
    typer.echo(f"catalog: {settings.db.resolve()} (schema v{summary.schema_version})")
    print_rows(["table", "rows"], sorted(summary.table_counts.items()), OutputFormat.TABLE)


def register(app: typer.Typer) -> None:
    app.command()(demo)
