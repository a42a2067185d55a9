"""`coral profile` (run the profiling grid into the catalog) and `coral profile show`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from catalog_db.connection import CatalogBusyError, read_connection
from catalog_db.profiles import read_points
from flows.cli.output import OutputFormat, print_rows
from flows.settings import Settings
from profiling.analytic import ProfileInputError
from profiling.base_backend import BackendName
from profiling.rent import RentBudget, RentError, rent_gpu_workers
from profiling.runner import ProfilingSummary, run_profiling

err = Console(stderr=True)
profile_app = typer.Typer(
    help="Profile models on GPU types into the catalog's profiles table.",
    invoke_without_command=True,
)


def _names(values: list[str] | None) -> list[str] | None:
    """`--models a,b --models c` -> [a, b, c]; None when not given."""
    if not values:
        return None
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def _run_with_progress(settings: Settings, **kwargs: object) -> ProfilingSummary:
    columns = (TextColumn("profiling"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=False) as progress:
        task = progress.add_task("jobs", total=None)

        def on_progress(done: int, total: int, written: int) -> None:
            progress.update(task, completed=done, total=total)

        return run_profiling(settings.db, on_progress=on_progress, **kwargs)  # type: ignore[arg-type]


@profile_app.callback()
def profile(
    ctx: typer.Context,
    models: Annotated[
        list[str] | None, typer.Option("--models", help="model ids, comma-separated (default: all)")
    ] = None,
    gpus: Annotated[
        list[str] | None, typer.Option("--gpus", help="GPU types, comma-separated (default: all)")
    ] = None,
    backend: Annotated[
        BackendName, typer.Option("--backend", help="auto: aic where it covers, else analytic")
    ] = BackendName.AUTO,
    scheduler: Annotated[
        str | None, typer.Option("--scheduler", help="Dask scheduler address (default: local)")
    ] = None,
    workers: Annotated[int | None, typer.Option("--workers", min=1)] = None,
    rent: Annotated[
        str | None, typer.Option("--rent", help="'aws': rent one GPU machine per GPU type")
    ] = None,
    budget_usd: Annotated[float, typer.Option("--budget-usd", min=0)] = 50.0,
    budget_hours: Annotated[float, typer.Option("--budget-hours", min=0)] = 2.0,
    ami: Annotated[
        str | None, typer.Option("--ami", help="--rent aws: GPU AMI with Docker + NVIDIA runtime")
    ] = None,
) -> None:
    """Run the profiling grid (skips points already stored: an interrupted run resumes)."""
    if ctx.invoked_subcommand is not None:
        return
    settings: Settings = ctx.obj
    address = scheduler or settings.dask_scheduler
    kwargs = {
        "models": _names(models),
        "gpus": _names(gpus),
        "backend": backend,
        "n_workers": workers or settings.dask_workers,
    }
    try:
        if rent:
            budget = RentBudget(max_usd=budget_usd, max_hours=budget_hours)
            summary = _rented(settings, rent, address, budget, ami, kwargs)
        else:
            summary = _run_with_progress(settings, scheduler_address=address, **kwargs)
    except (ProfileInputError, ValueError, RentError, CatalogBusyError, FileNotFoundError) as error:
        err.print(f"[red]error:[/red] {error}")
        raise typer.Exit(2) from None
    _print_summary(summary)


def _rented(
    settings: Settings,
    cloud: str,
    address: str | None,
    budget: RentBudget,
    ami: str | None,
    kwargs: dict[str, object],
) -> ProfilingSummary:
    if cloud != "aws":
        raise RentError(f"--rent {cloud!r}: only 'aws' is supported")
    if not address:
        raise RentError("--rent aws needs --scheduler: an address the rented workers can reach")
    if kwargs["backend"] is not BackendName.VLLM:
        raise RentError("--rent aws measures real GPUs: use it with --backend vllm")
    gpus = list(kwargs["gpus"] or [])  # type: ignore[call-overload]
    if not gpus:
        raise RentError("--rent aws needs --gpus: the GPU types to rent")
    if not ami:
        raise RentError("--rent aws needs --ami: a GPU image with Docker and the NVIDIA runtime")
    region = settings.aws_regions[0]
    with rent_gpu_workers(
        settings.db, gpus, address, budget, ami, region, settings.aws_endpoint_url
    ):
        return _run_with_progress(settings, scheduler_address=address, **kwargs)


def _print_summary(summary: ProfilingSummary) -> None:
    typer.echo(
        f"jobs {summary.jobs_total} (skipped {summary.jobs_skipped}, run {summary.jobs_run}, "
        f"aic->analytic fallbacks {summary.jobs_fallback}); points written "
        f"{summary.points_written}; {summary.seconds:.1f} s on {summary.workers} workers"
    )
    for note in summary.fallback_notes[:5]:
        err.print(f"[yellow]fallback:[/yellow] {note}")


@profile_app.command("show")
def show(
    ctx: typer.Context,
    model: Annotated[str, typer.Argument(help="model id, e.g. meta-llama/Llama-3.1-8B-Instruct")],
    gpu: Annotated[str, typer.Argument(help="GPU type, e.g. H100-SXM")],
    phase: Annotated[str | None, typer.Option("--phase", help="prefill or decode")] = None,
    tp: Annotated[int | None, typer.Option("--tp")] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", "-f")] = OutputFormat.TABLE,
) -> None:
    """Print the latency curves of MODEL on GPU: one row per (stage, batch), ms per length."""
    settings: Settings = ctx.obj
    with read_connection(settings.db, timeout_s=settings.db_lock_timeout_s) as con:
        points = read_points(con, model=model, gpu_type=gpu, phase=phase)
    points = tuple(p for p in points if tp is None or p.tp == tp)
    if not points:
        err.print(f"[red]no profile points[/red] for model {model!r} on GPU {gpu!r}")
        raise typer.Exit(1)
    seqs = sorted({p.seq_len_tokens for p in points})
    rows: dict[tuple, dict[int, float]] = {}
    for p in points:
        key = (p.phase.value, p.tp, p.num_layers, p.backend, p.batch_size, p.max_kv_tokens)
        rows.setdefault(key, {})[p.seq_len_tokens] = p.latency_ms
    columns = ["phase", "tp", "layers", "backend", "batch", "max_kv_tokens"]
    columns += [f"{s} tok (ms)" for s in seqs]
    table = [
        [*key, *(f"{values[s]:.2f}" if s in values else "" for s in seqs)]
        for key, values in rows.items()
    ]
    print_rows(columns, table, fmt, title=f"{model} on {gpu}")


def register(app: typer.Typer) -> None:
    app.add_typer(profile_app, name="profile")
