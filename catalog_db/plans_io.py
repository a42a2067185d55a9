"""Placement plans in the catalog: store a plan with its assignments, rentals and demand in one
transaction, read it back; read the planner's inputs (inventory snapshot, current templates).

Plan ids are deterministic (a hash of kind, inputs and result), so storing the same plan twice
replaces it instead of duplicating it. Baselines point at their Coral plan via parent_plan_id.
`plan_demand.region` holds the region name; rows of one model in same-named regions of two
clouds are summed (the table's key has no cloud column).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from functools import partial
from pathlib import Path
from typing import Any

import duckdb

from catalog_db.connection import read_connection, write_transaction
from catalog_db.templates_io import current_templates
from planning.domain import ModelDemand, Offer, Phase, Pricing, Template
from planning.placement.plan import (
    Assignment,
    DemandSplit,
    ModelService,
    Plan,
    PlanKind,
    PlanStatus,
    Rental,
)
from planning.placement.problem import PlacementProblem

BASELINES = (PlanKind.HOMOGENEOUS, PlanKind.MELANGE, PlanKind.HOMOGENEOUS_PD)
_PLAN_TABLES = ("plan_assignments", "plan_rentals", "plan_demand", "plans")


def plan_id_for(
    plan: Plan, workload_id: str | None, snapshot_id: str | None, salt: str = ""
) -> str:
    """`plan-` + 16 hex digits of a hash over the plan's kind, inputs' ids and its content."""
    content = {
        "kind": str(plan.kind),
        "mode": plan.mode,
        "solver": plan.solver,
        "status": str(plan.status),
        "workload": workload_id,
        "snapshot": snapshot_id,
        "salt": salt,
        "assignments": sorted(
            (a.template_id, a.cloud, a.region, str(a.pricing), a.count) for a in plan.assignments
        ),
        "rentals": sorted(
            (r.cloud, r.region, r.instance_type, str(r.pricing), r.count) for r in plan.rentals
        ),
        "explanation": plan.explanation,
    }
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
    return f"plan-{digest[:16]}"


def workload_id_for(demands: tuple[ModelDemand, ...]) -> str:
    """`wl-` + 16 hex digits of a hash over the demand values."""
    rows = sorted(
        (
            d.model,
            d.rate_req_per_s,
            d.mean_input_tokens,
            d.mean_output_tokens,
            d.ttft_slo_s,
            d.tpot_slo_s,
            d.workload_class,
            d.priority,
        )
        for d in demands
    )
    return "wl-" + hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]


def store_plan(
    db_path: Path | str,
    plan: Plan,
    *,
    demands: tuple[ModelDemand, ...],
    parent_plan_id: str | None = None,
    snapshot_id: str | None = None,
    workload_source: str = "manual",
    template_set_id: str | None = None,
    params: dict[str, Any] | None = None,
    snapshot_age_s: float | None = None,
    stale: bool = False,
) -> str:
    """Write the plan, its assignments, rentals, per-region demand and the workload it served in
    ONE transaction (all or nothing); returns the plan id. Re-storing replaces the same id.
    GPU vectors of the templates used are added to `template_gpus` where missing, so reports
    can read them for templates built outside the catalog (scenario variants, benchmarks)."""
    workload_id = workload_id_for(demands)
    plan_id = plan_id_for(plan, workload_id, snapshot_id, salt=parent_plan_id or "")
    with write_transaction(db_path) as con:
        for table in _PLAN_TABLES:
            con.execute(f"DELETE FROM {table} WHERE plan_id = ?", [plan_id])
        _write_workload(con, workload_id, demands, workload_source)
        _write_plan_row(
            con, plan_id, plan, parent_plan_id, snapshot_id, workload_id, template_set_id, params
        )
        # a plan made on an older snapshot (the read failed) says so, with the snapshot's age
        con.execute(
            "UPDATE plans SET stale = ?, snapshot_age_s = ? WHERE plan_id = ?",
            [stale, snapshot_age_s, plan_id],
        )
        _write_children(con, plan_id, plan)
        _write_template_gpus(con, plan)
    return plan_id


def _write_workload(
    con: duckdb.DuckDBPyConnection, workload_id: str, demands: tuple[ModelDemand, ...], source: str
) -> None:
    con.execute("DELETE FROM workloads WHERE workload_id = ?", [workload_id])
    con.executemany(
        "INSERT INTO workloads (workload_id, model, rate_req_per_s, mean_input_tokens, "
        "mean_output_tokens, ttft_slo_s, tpot_slo_s, priority, source) VALUES (?,?,?,?,?,?,?,?,?)",
        [
            [
                workload_id,
                d.model,
                d.rate_req_per_s,
                d.mean_input_tokens,
                d.mean_output_tokens,
                d.ttft_slo_s,
                d.tpot_slo_s,
                d.priority,
                source,
            ]
            for d in demands
        ],
    )


def _write_plan_row(
    con: duckdb.DuckDBPyConnection,
    plan_id: str,
    plan: Plan,
    parent: str | None,
    snapshot_id: str | None,
    workload_id: str,
    template_set_id: str | None,
    params: dict[str, Any] | None,
) -> None:
    extra = {
        **(params or {}),
        "churn_changes": plan.churn_changes,
        "best_bound": plan.best_bound,
        "services": [
            [s.model, s.demand_req_per_s, s.served_fraction, s.priority] for s in plan.services
        ],
    }
    con.execute(
        "INSERT INTO plans (plan_id, kind, parent_plan_id, mode, solver, status, objective, "
        "cost_usd_per_hr, lp_bound, gap, solve_s, served_fraction, snapshot_id, workload_id, "
        "template_set_id, explanation, params) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [
            plan_id,
            str(plan.kind),
            parent,
            plan.mode,
            plan.solver,
            str(plan.status),
            plan.objective,
            plan.cost_usd_per_hr,
            plan.lp_bound,
            plan.gap,
            plan.solve_s,
            plan.served_fraction,
            snapshot_id,
            workload_id,
            template_set_id,
            plan.explanation,
            json.dumps(extra),
        ],
    )


def _write_children(con: duckdb.DuckDBPyConnection, plan_id: str, plan: Plan) -> None:
    if plan.assignments:
        con.executemany(
            "INSERT INTO plan_assignments VALUES (?,?,?,?,?,?,?,?)",
            [
                [
                    plan_id,
                    a.template_id,
                    a.model,
                    str(a.phase),
                    a.cloud,
                    a.region,
                    str(a.pricing),
                    a.count,
                ]
                for a in plan.assignments
            ],
        )
    rentals: dict[tuple, list[float]] = defaultdict(lambda: [0, 0.0])
    meta: dict[tuple, tuple[str, int]] = {}
    for r in plan.rentals:  # two offers of one instance type (zones) merge; price count-weighted
        key = (r.cloud, r.region, r.instance_type, str(r.pricing))
        rentals[key][0] += r.count
        rentals[key][1] += r.count * r.price_usd_per_hr
        meta[key] = (r.gpu_type, r.gpu_count)
    if rentals:
        con.executemany(
            "INSERT INTO plan_rentals VALUES (?,?,?,?,?,?,?,?,?)",
            [[plan_id, *k, *meta[k], int(n), usd / n] for k, (n, usd) in rentals.items()],
        )
    served = {s.model: s.served_fraction for s in plan.services}
    demand: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for d in plan.demand_splits:
        demand[(d.model, d.region)][0] += d.pd_rate_req_per_s
        demand[(d.model, d.region)][1] += d.coloc_rate_req_per_s
    if demand:
        con.executemany(
            "INSERT INTO plan_demand VALUES (?,?,?,?,?,?)",
            [[plan_id, m, r, pd, co, served.get(m, 1.0)] for (m, r), (pd, co) in demand.items()],
        )


def _write_template_gpus(con: duckdb.DuckDBPyConnection, plan: Plan) -> None:
    rows = {(a.template_id, g, n) for a in plan.assignments for g, n in a.gpus}
    if rows:
        con.executemany(
            "INSERT INTO template_gpus VALUES (?,?,?) ON CONFLICT DO NOTHING", sorted(rows)
        )


def read_plan(db_path: Path | str, plan_id: str) -> Plan:
    """A stored plan as a Plan value (KeyError if absent)."""
    with read_connection(db_path) as con:
        row = con.execute(
            "SELECT kind, mode, solver, status, objective, cost_usd_per_hr, lp_bound, gap, "
            "solve_s, explanation, params FROM plans WHERE plan_id = ?",
            [plan_id],
        ).fetchone()
        if row is None:
            raise KeyError(f"no plan {plan_id!r} in the catalog")
        assignments = con.execute(
            "SELECT a.template_id, model, phase, cloud, region, pricing, count, "
            "list(g.gpu_type || ':' || g.gpu_count ORDER BY g.gpu_type) FROM plan_assignments a "
            "LEFT JOIN template_gpus g USING (template_id) WHERE plan_id = ? GROUP BY ALL "
            "ORDER BY ALL",
            [plan_id],
        ).fetchall()
        rentals = con.execute(
            "SELECT cloud, region, instance_type, pricing, gpu_type, gpu_count, count, "
            "price_usd_per_hr FROM plan_rentals WHERE plan_id = ? ORDER BY ALL",
            [plan_id],
        ).fetchall()
        splits = con.execute(
            "SELECT model, region, pd_rate_req_per_s, coloc_rate_req_per_s FROM plan_demand "
            "WHERE plan_id = ? ORDER BY ALL",
            [plan_id],
        ).fetchall()
    params = json.loads(row[10] or "{}")
    return Plan(
        kind=PlanKind(row[0]),
        mode=row[1],
        solver=row[2],
        status=PlanStatus(row[3]),
        objective=row[4],
        cost_usd_per_hr=row[5],
        lp_bound=row[6],
        gap=row[7],
        solve_s=row[8],
        explanation=row[9],
        churn_changes=int(params.get("churn_changes", 0)),
        best_bound=params.get("best_bound"),
        assignments=tuple(
            Assignment(t, m, Phase(ph), c, r, Pricing(p), n, _gpus(g))
            for t, m, ph, c, r, p, n, g in assignments
        ),
        rentals=tuple(
            Rental(c, r, i, Pricing(p), g, k, n, usd) for c, r, i, p, g, k, n, usd in rentals
        ),
        demand_splits=tuple(DemandSplit(m, "", r, pd, co) for m, r, pd, co in splits),
        services=tuple(ModelService(*s) for s in params.get("services", [])),
    )


def _gpus(items: list[str | None]) -> tuple[tuple[str, int], ...]:
    pairs = [item.rsplit(":", 1) for item in items if item]
    return tuple((g, int(n)) for g, n in pairs)


def read_offers(db_path: Path | str, snapshot_id: str) -> tuple[Offer, ...]:
    """Offers of an inventory snapshot whose status is ok or partial (ValueError otherwise)."""
    from catalog_db.inventory.snapshots import offers

    with read_connection(db_path) as con:
        row = con.execute(
            "SELECT status, error FROM inventory_snapshots WHERE snapshot_id = ?", [snapshot_id]
        ).fetchone()
        if row is None:
            raise ValueError(f"no inventory snapshot {snapshot_id!r}; see `coral inventory list`")
        if row[0] not in ("ok", "partial"):
            raise ValueError(f"inventory snapshot {snapshot_id} failed ({row[1]}); not usable")
        return offers(con, snapshot_id)


def read_templates(db_path: Path | str, models: tuple[str, ...]) -> tuple[Template, ...]:
    """Templates of the current template set for these models (empty if none are built)."""
    with read_connection(db_path) as con:
        return tuple(current_templates(con, list(models)))


def plan_and_store(
    db_path: Path | str,
    problem: PlacementProblem,
    *,
    snapshot_id: str | None = None,
    workload_source: str = "manual",
    baselines: tuple[PlanKind, ...] = BASELINES,
    params: dict[str, Any] | None = None,
    snapshot_age_s: float | None = None,
    stale: bool = False,
) -> tuple[tuple[str, Plan], ...]:
    """Solve each baseline, then Coral's plan warm-started from the best of them (so it is never
    worse than any), with no catalog lock held while solving; then store each. Returns
    (plan_id, plan) pairs, Coral's first. The replan flow's one call."""
    from planning.placement.baselines import best_start, solve_baseline
    from planning.placement.solve import solve

    others = [solve_baseline(kind, problem) for kind in baselines]
    coral = solve(problem, start=best_start(others))
    info = {**(params or {}), "scenario": problem.name, "headroom": problem.headroom}
    store = partial(
        store_plan, db_path, demands=problem.demands, snapshot_id=snapshot_id,
        workload_source=workload_source, params=info, snapshot_age_s=snapshot_age_s, stale=stale,
    )  # fmt: skip
    coral_id = store(coral)
    stored = [(coral_id, coral)]
    stored += [(store(plan, parent_plan_id=coral_id), plan) for plan in others]
    return tuple(stored)
