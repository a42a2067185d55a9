"""`coral plan --scenario NAME | --workload FILE --inventory SNAPSHOT`: solve, store, print."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from catalog_db.connection import CatalogBusyError
from catalog_db.plans_io import plan_and_store, read_offers, read_templates
from catalog_db.scenarios import ScenarioError, load_scenario, load_workload_csv, to_problem
from flows.cli.output import OutputFormat, print_rows
from flows.settings import Settings
from planning.placement.plan import Plan
from planning.placement.problem import Mode, PlacementInputError, PlacementProblem, SolverName

err = Console(stderr=True)


def plan(
    ctx: typer.Context,
    scenario: Annotated[str | None, typer.Option(help="bundled scenario name or YAML path")] = None,
    workload: Annotated[
        Path | None, typer.Option(help="demand CSV (model, rate_req_per_s, ...)")
    ] = None,
    inventory: Annotated[str | None, typer.Option(help="inventory snapshot id")] = None,
    mode: Annotated[Mode | None, typer.Option(help="cost or goodput")] = None,
    solver: Annotated[SolverName | None, typer.Option(help="cbc or highs")] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", "-f")] = OutputFormat.TABLE,
) -> None:
    """Plan placement for all models at once, store it with baselines, print the comparison."""
    settings: Settings = ctx.obj
    try:
        problem, snapshot_id, source = _problem(
            settings, scenario, workload, inventory, mode, solver
        )
        stored = plan_and_store(
            settings.db, problem, snapshot_id=snapshot_id, workload_source=source
        )
    except (
        ScenarioError,
        PlacementInputError,
        ValueError,
        CatalogBusyError,
        FileNotFoundError,
    ) as error:
        err.print(f"[red]error:[/red] {error}")
        raise typer.Exit(2) from None
    coral_id, coral = stored[0]
    typer.echo(f"plan {coral_id}: {coral.status}, solver {coral.solver}, {coral.solve_s:.2f} s")
    if coral.explanation:
        typer.echo(f"explanation: {coral.explanation}")
    print_rows(*_model_rows(coral), fmt, title="per model")
    print_rows(*_baseline_rows(stored), fmt, title="Coral vs baselines")
    if not coral.feasible:
        raise typer.Exit(1)


def _problem(
    settings: Settings,
    scenario: str | None,
    workload: Path | None,
    inventory: str | None,
    mode: Mode | None,
    solver: SolverName | None,
) -> tuple[PlacementProblem, str | None, str]:
    chosen = SolverName(solver or settings.solver.value)
    if scenario is not None:
        if workload is not None or inventory is not None:
            raise ValueError("give --scenario, or --workload with --inventory, not both")
        sc = load_scenario(scenario)
        templates = read_templates(settings.db, sc.base_models)
        problem = to_problem(
            sc, templates, solver=chosen, time_limit_s=settings.solver_time_limit_s, mode=mode
        )
        return problem, None, f"scenario:{sc.name}"
    if workload is None or inventory is None:
        raise ValueError("give --scenario NAME, or both --workload FILE and --inventory SNAPSHOT")
    demands = load_workload_csv(workload)
    offers = read_offers(settings.db, inventory)
    templates = read_templates(settings.db, tuple(d.model for d in demands))
    problem = PlacementProblem(
        templates=templates,
        offers=offers,
        demands=demands,
        headroom=settings.headroom,
        mode=mode or Mode.COST,
        solver=chosen,
        time_limit_s=settings.solver_time_limit_s,
        name=workload.name,
    )
    return problem, inventory, "manual"


def _model_rows(p: Plan) -> tuple[list[str], list[list[object]]]:
    templates: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    gpus: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    regions: dict[str, set[str]] = defaultdict(set)
    for a in p.assignments:
        templates[a.model][str(a.phase)[0].upper()] += a.count
        regions[a.model].add(f"{a.cloud}/{a.region}")
        for g, n in a.gpus:
            gpus[a.model][g] += n * a.count
    cost = p.cost_by_model_usd_per_hr()
    served = {s.model: s.served_fraction for s in p.services}
    rows: list[list[object]] = []
    for model in sorted(served):
        rows.append(
            [
                model,
                " ".join(f"{n}{k}" for k, n in sorted(templates[model].items())),
                " ".join(f"{n}x{g}" for g, n in sorted(gpus[model].items())),
                " ".join(sorted(regions[model])),
                f"{served[model]:.0%}",
                f"{cost.get(model, 0):.2f}",
            ]
        )
    if "(idle)" in cost:
        rows.append(["(idle GPUs in rented machines)", "", "", "", "", f"{cost['(idle)']:.2f}"])
    rows.append(["TOTAL", "", "", "", f"{p.served_fraction:.0%}", f"{p.cost_usd_per_hr or 0:.2f}"])
    return ["model", "instances (P/D/C)", "GPUs", "regions", "served", "usd_per_hr"], rows


def _baseline_rows(stored: tuple[tuple[str, Plan], ...]) -> tuple[list[str], list[list[object]]]:
    coral_cost = stored[0][1].cost_usd_per_hr
    rows: list[list[object]] = []
    for plan_id, p in stored:
        ratio = (
            p.cost_usd_per_hr / coral_cost if p.cost_usd_per_hr is not None and coral_cost else None
        )
        rows.append(
            [
                str(p.kind),
                plan_id,
                str(p.status),
                None if p.cost_usd_per_hr is None else f"{p.cost_usd_per_hr:.2f}",
                None if ratio is None else f"{ratio:.2f}x",
                f"{p.served_fraction:.1%}",
                None if p.gap is None else f"{p.gap:.2%}",
            ]
        )
    return ["kind", "plan_id", "status", "usd_per_hr", "vs coral", "served", "gap_to_lp"], rows


def register(app: typer.Typer) -> None:
    app.command()(plan)
