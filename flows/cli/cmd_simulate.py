"""`coral simulate --plan ID --trace code|conv|PATH [--policy static] [--seed N]`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from catalog_db.connection import CatalogBusyError
from catalog_db.sim_io import simulate_plan
from catalog_db.traces import TraceError
from flows.cli.output import OutputFormat, print_rows
from flows.settings import Settings
from planning.routing import RouterPolicy
from planning.routing.base_router import DEFAULT_LINK_GBPS

err = Console(stderr=True)


def simulate(
    ctx: typer.Context,
    plan: Annotated[str, typer.Option("--plan", help="plan_id of a stored plan")],
    trace: Annotated[str, typer.Option("--trace", help="code, conv or a CSV path")] = "conv",
    policy: Annotated[RouterPolicy, typer.Option("--policy")] = RouterPolicy.STATIC,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    link_gbps: Annotated[float, typer.Option("--link-gbps", help="P->D link")] = DEFAULT_LINK_GBPS,
    fmt: Annotated[OutputFormat, typer.Option("--format", "-f")] = OutputFormat.TABLE,
) -> None:
    """Replay a trace against a stored plan's instances; store and print a sim_runs row."""
    settings: Settings = ctx.obj
    try:
        summary = simulate_plan(
            settings.db, plan, trace, policy, seed, link_gbps, settings.db_lock_timeout_s
        )
    except (KeyError, TraceError, FileNotFoundError, CatalogBusyError, ValueError) as error:
        err.print(f"[red]error:[/red] {error}")
        raise typer.Exit(1) from None
    columns = [
        "sim_run_id", "plan_id", "trace", "policy", "seed", "requests", "completed", "dropped",
        "slo_attainment", "goodput_req_per_s", "ttft_p99_s", "tpot_p99_s", "gpu_hours",
        "cost_usd", "wall_s",
    ]  # fmt: skip
    print_rows(columns, [[getattr(summary, c) for c in columns]], fmt, title="simulation")


def register(app: typer.Typer) -> None:
    app.command()(simulate)
