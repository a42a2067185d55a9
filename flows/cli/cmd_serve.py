"""`coral serve`: register Coral's Prefect deployments with their schedules and run them.

Points at `PREFECT_API_URL` (a shared server) when set, else at a local server: start one with
`prefect server start --host 127.0.0.1` and export PREFECT_API_URL=http://127.0.0.1:4200/api.
"""

from __future__ import annotations

import typer
from prefect import serve as prefect_serve

from flows.deployments import build_deployments
from flows.settings import Settings


def serve(
    ctx: typer.Context, limit: int = typer.Option(4, help="max concurrent flow runs")
) -> None:
    """Serve nightly-profiling, replan, rollout and cost-report (blocks until interrupted)."""
    settings: Settings = ctx.obj
    prefect_serve(*build_deployments(settings), limit=limit)


def register(app: typer.Typer) -> None:
    app.command()(serve)
