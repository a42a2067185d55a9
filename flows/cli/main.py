"""`coral` entry point: global options, settings built once, command modules discovered."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Annotated

import typer

import flows.cli
from flows.settings import load_settings

app = typer.Typer(
    name="coral",
    help="Serve many LLMs on heterogeneous cloud GPUs at the lowest cost that meets SLOs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def root(
    ctx: typer.Context,
    db: Annotated[
        Path | None,
        typer.Option("--db", envvar="CORAL_DB", help="catalog file (default ./coral.duckdb)"),
    ] = None,
) -> None:
    """Build the settings once; every command reads them from ctx.obj."""
    ctx.obj = load_settings(db=db)


def _register_commands() -> None:
    for info in sorted(pkgutil.iter_modules(flows.cli.__path__), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            importlib.import_module(f"flows.cli.{info.name}").register(app)


_register_commands()


def main() -> None:
    app()
