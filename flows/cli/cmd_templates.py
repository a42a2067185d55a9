"""`coral templates build|list|show MODEL`: serving templates in the catalog."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console

from catalog_db.connection import CatalogBusyError, read_connection
from catalog_db.templates_io import NoProfilesError, rebuild_templates
from flows.cli.output import OutputFormat, print_rows
from flows.settings import Settings
from planning.domain import Phase
from planning.templates.params import TemplateParams

FormatOption = Annotated[OutputFormat, typer.Option("--format", "-f", help="table, csv or json")]
err = Console(stderr=True)

_LIST_SQL = (
    "SELECT model, phase, workload_class, stages, total_gpus, "
    "round(throughput_tokens_per_s, 1) AS tokens_per_s, "
    "round(throughput_req_per_s, 3) AS req_per_s, round(usd_per_hr, 2) AS usd_per_hr, "
    "round(usd_per_million_tokens, 3) AS usd_per_million_tokens FROM template_costs "
    "WHERE (? IS NULL OR model = ?) AND (? IS NULL OR phase = ?) "
    "AND (? IS NULL OR workload_class = ?) "
    "ORDER BY model, phase, workload_class, usd_per_million_tokens NULLS LAST, total_gpus"
)
_SHOW_SQL = (
    "SELECT t.phase, t.workload_class, t.num_stages, t.pp_layer_partition, t.stages, "
    "t.total_gpus, round(t.throughput_tokens_per_s, 1) AS tokens_per_s, "
    "round(t.throughput_req_per_s, 3) AS req_per_s, round(t.latency_s, 4) AS latency_s, "
    "t.max_batch, round(t.ref_cost_usd_per_hr, 2) AS usd_per_hr, "
    "round(c.usd_per_million_tokens, 3) AS usd_per_million_tokens, t.template_id "
    "FROM templates t JOIN template_sets s ON s.template_set_id = t.template_set_id "
    "AND s.is_current LEFT JOIN template_costs c USING (template_id) WHERE t.model = ? "
    "ORDER BY t.phase, t.workload_class, c.usd_per_million_tokens NULLS LAST, t.total_gpus"
)


def _stages_text(stages_json: str) -> str:
    """'4xH100-SXM[40] + 8xL40S[40]': TP x GPU type [layers], in pipeline order."""
    stages = json.loads(stages_json)
    return " + ".join(f"{s['tp']}x{s['gpu_type']}[{s['num_layers']}]" for s in stages)


def build(
    ctx: typer.Context,
    model: Annotated[
        list[str] | None, typer.Option("--model", "-m", help="rebuild only these models")
    ] = None,
    max_prefill_stages: Annotated[int, typer.Option(min=1, max=8)] = 4,
    max_decode_stages: Annotated[int, typer.Option(min=1, max=8)] = 1,
    max_colocated_stages: Annotated[int, typer.Option(min=1, max=8)] = 1,
    max_gpu_types: Annotated[int, typer.Option(min=1, help="GPU types per pipeline")] = 2,
    mixed_tp: Annotated[
        bool, typer.Option(help="allow stages of different TP (vLLM cannot run them)")
    ] = False,
) -> None:
    """Enumerate, rate and prune templates from the catalog's profiles; store a new set."""
    settings: Settings = ctx.obj
    params = TemplateParams(
        max_stages_prefill=max_prefill_stages,
        max_stages_decode=max_decode_stages,
        max_stages_colocated=max_colocated_stages,
        max_gpu_types_per_pipeline=max_gpu_types,
        uniform_tp=not mixed_tp,
    )
    try:
        summary = rebuild_templates(settings.db, params, model, settings.db_lock_timeout_s)
    except (KeyError, NoProfilesError, FileNotFoundError, CatalogBusyError) as error:
        err.print(f"[red]error:[/red] {error.args[0] if error.args else error}")
        raise typer.Exit(1) from None
    state = "new current set" if summary.changed else "unchanged (same content as current)"
    typer.echo(
        f"template set {summary.template_set_id}: {state}; enumerated {summary.enumerated}, "
        f"evaluated {summary.evaluated}, kept {summary.kept} in {summary.build_s:.1f} s"
    )
    for name in summary.models_without_profiles:
        typer.echo(f"skipped {name}: no profiles")
    rows = [
        (c.model, str(c.phase), c.workload_class, c.enumerated, c.evaluated, c.feasible, c.kept)
        for c in summary.counts
    ]
    columns = ["model", "phase", "class", "enumerated", "evaluated", "feasible", "kept"]
    print_rows(columns, rows, OutputFormat.TABLE)


def list_templates(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option("--model", "-m")] = None,
    phase: Annotated[Phase | None, typer.Option("--phase")] = None,
    workload_class: Annotated[str | None, typer.Option("--class")] = None,
    fmt: FormatOption = OutputFormat.TABLE,
) -> None:
    """Current templates with $/h and $ per million tokens at reference prices."""
    settings: Settings = ctx.obj
    phase_name = None if phase is None else str(phase)
    args = [model, model, phase_name, phase_name, workload_class, workload_class]
    with read_connection(settings.db, settings.db_lock_timeout_s) as con:
        cursor = con.execute(_LIST_SQL, args)
        columns = [d[0] for d in cursor.description or ()]
        rows = [list(r) for r in cursor.fetchall()]
    for row in rows:
        row[3] = _stages_text(row[3])
    print_rows(columns, rows, fmt, title="templates")


def show(
    ctx: typer.Context,
    model: Annotated[str, typer.Argument(help="model name, e.g. Qwen/Qwen3-8B")],
    fmt: FormatOption = OutputFormat.TABLE,
) -> None:
    """Every current template of MODEL: stages, layer partition, throughput, latency, cost."""
    settings: Settings = ctx.obj
    with read_connection(settings.db, settings.db_lock_timeout_s) as con:
        known = con.execute("SELECT count(*) FROM models WHERE model = ?", [model]).fetchone()
        cursor = con.execute(_SHOW_SQL, [model])
        columns = [d[0] for d in cursor.description or ()]
        rows = [list(r) for r in cursor.fetchall()]
    if not known or not known[0]:
        err.print(f"[red]error:[/red] unknown model {model!r}; see `coral catalog models`")
        raise typer.Exit(1)
    if not rows:
        err.print(f"[red]error:[/red] no templates for {model!r}; run `coral templates build`")
        raise typer.Exit(1)
    for row in rows:
        row[4] = _stages_text(row[4])
    print_rows(columns, rows, fmt, title=model)


def register(app: typer.Typer) -> None:
    templates = typer.Typer(help="Serving templates: build, list, show.", no_args_is_help=True)
    templates.command("build")(build)
    templates.command("list")(list_templates)
    templates.command("show")(show)
    app.add_typer(templates, name="templates")
