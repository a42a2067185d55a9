"""`coral inventory snapshot|show|list`: read cloud inventory into the catalog and look at it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from catalog_db.connection import CatalogBusyError, read_connection
from catalog_db.inventory.base_source import SourceName
from catalog_db.inventory.snapshots import (
    latest_good_snapshot,
    list_snapshots,
    snapshot_info,
    snapshot_items,
    take_snapshot,
)
from flows.cli.output import OutputFormat, print_rows
from flows.settings import Settings

FormatOption = Annotated[OutputFormat, typer.Option("--format", "-f", help="table, csv or json")]
err = Console(stderr=True)


def _source_kwargs(
    settings: Settings,
    source: SourceName,
    regions: list[str] | None,
    file: Path | None,
    count: int | None,
) -> dict[str, Any]:
    if source is SourceName.AWS:
        return {
            "regions": tuple(regions or settings.aws_regions),
            "profile": settings.aws_profile,
            "endpoint_url": settings.aws_endpoint_url,
        }
    if source is SourceName.FILE:
        if file is None:
            err.print("[red]--file is required with --source file[/red]")
            raise typer.Exit(2)
        return {"path": file}
    return {"count": count, "regions": tuple(regions) if regions else None}


def snapshot(
    ctx: typer.Context,
    source: Annotated[SourceName, typer.Option("--source", "-s", help="aws, file or catalog")],
    regions: Annotated[
        list[str] | None, typer.Option("--regions", "-r", help="repeat or comma-separate")
    ] = None,
    file: Annotated[Path | None, typer.Option("--file", help="YAML/CSV for --source file")] = None,
    count: Annotated[
        int | None, typer.Option("--count", min=0, help="catalog source: machines per type")
    ] = None,
    fmt: FormatOption = OutputFormat.TABLE,
) -> None:
    """Read inventory and store it as a snapshot; on failure the last good one stays in use."""
    settings: Settings = ctx.obj
    split = [r for value in regions or [] for r in value.split(",") if r] or None
    kwargs = _source_kwargs(settings, source, split, file, count)
    try:
        result = take_snapshot(settings.db, source, timeout_s=settings.db_lock_timeout_s, **kwargs)
    except (FileNotFoundError, CatalogBusyError) as error:
        err.print(f"[red]error:[/red] {error}")
        raise typer.Exit(1) from None
    attempt = result.attempt
    print_rows(
        ["snapshot_id", "source", "status", "items", "error"],
        [[attempt.snapshot_id, attempt.source, attempt.status, attempt.item_count, attempt.error]],
        fmt,
    )
    if result.stale:
        using = result.snapshot.snapshot_id if result.snapshot else "none"
        age = f"{result.age_s:.0f} s old" if result.age_s is not None else "no snapshot exists"
        err.print(f"[yellow]read failed; planning uses snapshot {using} ({age})[/yellow]")
        raise typer.Exit(1)


def show(
    ctx: typer.Context,
    snapshot_id: Annotated[
        str | None, typer.Option("--snapshot", help="default: the latest good snapshot")
    ] = None,
    fmt: FormatOption = OutputFormat.TABLE,
) -> None:
    """List the rows of one snapshot (machines, prices, availability, provenance)."""
    settings: Settings = ctx.obj
    try:
        with read_connection(settings.db, timeout_s=settings.db_lock_timeout_s) as con:
            info = snapshot_info(con, snapshot_id) if snapshot_id else latest_good_snapshot(con)
            if info is None:
                err.print("no good inventory snapshot yet; run `coral inventory snapshot`")
                raise typer.Exit(1)
            items = snapshot_items(con, info.snapshot_id)
    except (KeyError, FileNotFoundError, CatalogBusyError) as error:
        err.print(f"[red]error:[/red] {error}")
        raise typer.Exit(1) from None
    columns = ["cloud", "region", "zone", "instance_type", "pricing", "gpu_type", "gpu_count",
               "price_usd_per_hr", "available_count", "known_gpu", "provenance"]  # fmt: skip
    rows = [[getattr(i, c) for c in columns] for i in items]
    title = f"{info.snapshot_id} ({info.source}, {info.status}, taken {info.taken_at:%Y-%m-%d %H:%M:%S} UTC)"
    print_rows(columns, rows, fmt, title=title)


def list_(ctx: typer.Context, fmt: FormatOption = OutputFormat.TABLE) -> None:
    """List recent snapshots, newest first, failed ones included."""
    settings: Settings = ctx.obj
    with read_connection(settings.db, timeout_s=settings.db_lock_timeout_s) as con:
        infos = list_snapshots(con)
    print_rows(
        ["snapshot_id", "source", "taken_at", "status", "items", "error"],
        [[i.snapshot_id, i.source, i.taken_at, i.status, i.item_count, i.error] for i in infos],
        fmt,
    )


def register(app: typer.Typer) -> None:
    inventory = typer.Typer(help="Cloud inventory snapshots.", no_args_is_help=True)
    inventory.command("snapshot")(snapshot)
    inventory.command("show")(show)
    inventory.command("list")(list_)
    app.add_typer(inventory, name="inventory")
