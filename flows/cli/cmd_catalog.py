"""`coral init`, `coral sql`, `coral catalog gpus|models|instances`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from catalog_db.connection import CatalogBusyError, read_connection
from catalog_db.readonly_sql import WriteRefusedError, run_read_only
from catalog_db.reference import RowError
from catalog_db.setup import init_catalog
from flows.cli.output import OutputFormat, print_rows
from flows.settings import Settings

FormatOption = Annotated[OutputFormat, typer.Option("--format", "-f", help="table, csv or json")]
err = Console(stderr=True)

_LISTINGS = {
    "gpus": "SELECT gpu_type, vendor, memory_gib, hbm_bandwidth_gbps, bf16_dense_tflops, "
    "fp8_dense_tflops, intra_node_bw_gbps, gpus_per_machine, verified FROM gpu_types ORDER BY gpu_type",
    "models": "SELECT model, num_layers, hidden_size, num_heads, num_kv_heads, num_experts, "
    "num_experts_per_tok, attention, total_params_b, active_params_b, default_dtype, verified "
    "FROM models ORDER BY model",
    "instances": "SELECT cloud, instance_type, region, zone, gpu_type, gpu_count, "
    "ondemand_usd_per_hr, spot_usd_per_hr FROM instance_types ORDER BY cloud, instance_type, region, zone",
}


def init(ctx: typer.Context) -> None:
    """Create or migrate the catalog and load the bundled reference data."""
    settings: Settings = ctx.obj
    try:
        summary = init_catalog(settings.db, timeout_s=settings.db_lock_timeout_s)
    except RowError as error:
        err.print(f"[red]reference data refused, nothing written:[/red] {error}")
        raise typer.Exit(2) from None
    applied = ", ".join(map(str, summary.migrations_applied)) or "none (up to date)"
    typer.echo(
        f"catalog {settings.db}: schema v{summary.schema_version}, migrations applied: {applied}"
    )
    print_rows(["table", "rows"], sorted(summary.table_counts.items()), OutputFormat.TABLE)


def sql(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="SELECT ... (read-only)")],
    fmt: FormatOption = OutputFormat.TABLE,
) -> None:
    """Run read-only SQL over the catalog; any write is refused."""
    settings: Settings = ctx.obj
    try:
        with read_connection(settings.db, timeout_s=settings.db_lock_timeout_s) as con:
            columns, rows = run_read_only(con, query)
    except WriteRefusedError as error:
        err.print(f"[red]refused:[/red] {error}")
        raise typer.Exit(3) from None
    except (FileNotFoundError, CatalogBusyError) as error:
        err.print(f"[red]error:[/red] {error}")
        raise typer.Exit(1) from None
    except Exception as error:  # DuckDB parser/binder errors: show them, no traceback
        err.print(f"[red]SQL error:[/red] {error}")
        raise typer.Exit(1) from None
    print_rows(columns, rows, fmt)


def _listing(name: str):  # type: ignore[no-untyped-def]
    def command(ctx: typer.Context, fmt: FormatOption = OutputFormat.TABLE) -> None:
        settings: Settings = ctx.obj
        with read_connection(settings.db, timeout_s=settings.db_lock_timeout_s) as con:
            columns, rows = run_read_only(con, _LISTINGS[name])
        print_rows(columns, rows, fmt, title=name)

    command.__doc__ = f"List {name} in the catalog."
    return command


def register(app: typer.Typer) -> None:
    app.command()(init)
    app.command()(sql)
    catalog = typer.Typer(help="Browse the reference catalog.", no_args_is_help=True)
    for name in _LISTINGS:
        catalog.command(name)(_listing(name))
    app.add_typer(catalog, name="catalog")
