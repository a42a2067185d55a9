"""`coral demo`: the whole pipeline on embedded defaults (what `make demo` runs)."""

from __future__ import annotations

import os

import typer

from catalog_db.connection import read_connection
from catalog_db.queries import table_counts
from flows.cli.output import OutputFormat, print_rows
from flows.settings import Settings

# Prefect's ephemeral API server takes ~20 s to start on a 2-core machine and its default
# start-up timeout is 20 s; give it room so the demo never flakes.
_PREFECT_STARTUP_TIMEOUT_S = "180"


def demo(ctx: typer.Context) -> None:
    """Profile → templates → inventory → replan → simulate → dry-run rollout → report."""
    settings: Settings = ctx.obj
    os.environ.setdefault(
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", _PREFECT_STARTUP_TIMEOUT_S
    )
    from flows.demo import demo_pipeline  # imports Prefect after the timeout is set

    result = demo_pipeline(db=settings.db, out_dir=settings.out_dir)
    with read_connection(settings.db) as con:
        print_rows(["table", "rows"], sorted(table_counts(con).items()), OutputFormat.TABLE)
        deployment = con.execute(
            "SELECT render_dir FROM deployments WHERE plan_id = ? ORDER BY created_at DESC LIMIT 1",
            [result.plan_id],
        ).fetchone()
    typer.echo(f"catalog:             {settings.db.resolve()}")
    typer.echo(f"plan:                {result.plan_id}")
    typer.echo(f"rendered deployment: {deployment[0] if deployment else '(none: plan infeasible)'}")
    typer.echo(f"report (HTML):       {result.report_html}")
    typer.echo(
        f"try: coral sql \"SELECT * FROM plan_cost_by_gpu_region WHERE plan_id = '{result.plan_id}'\""
    )


def register(app: typer.Typer) -> None:
    app.command()(demo)
