"""Deploy's catalog IO: read a plan for rendering; store deployments, units and rollout events.

Queries take the connection first. Writers are meant to run inside one short
`write_transaction` each (the rollout opens one per recorded step).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import duckdb

from catalog_db.templates_io import parse_stages
from deploy.render.inputs import (
    AssignmentInput,
    ModelSlo,
    RenderInput,
    RentalInput,
    TemplateSpec,
)
from deploy.render.units import (
    DeploymentSpec,
    EngineUnit,
    RouterUnit,
    engine_from_dict,
    router_from_dict,
)
from planning.domain import Phase, Pricing, Template


class PlanNotFoundError(LookupError):
    """No plan with that id in the catalog."""


class PlanNotDeployableError(ValueError):
    """The plan exists but must not be rolled out (infeasible, stale, or incomplete)."""


_TEMPLATE_COLUMNS = (
    "t.template_id, t.model, t.phase, t.workload_class, t.stages, t.throughput_tokens_per_s, "
    "t.throughput_req_per_s, t.latency_s, t.max_batch, t.profile_backend, "
    "t.profile_backend_version, t.pp_layer_partition, w.input_tokens, w.output_tokens"
)


def _check_plan(con: duckdb.DuckDBPyConnection, plan_id: str) -> str | None:
    """The plan's workload id; raises when the plan is missing or not deployable."""
    row = con.execute(
        "SELECT status, stale, workload_id, explanation FROM plans WHERE plan_id = ?", [plan_id]
    ).fetchone()
    if row is None:
        raise PlanNotFoundError(f"plan {plan_id!r} not found; see `coral sql 'FROM plans'`")
    status, stale, workload_id, explanation = row
    if status == "infeasible":
        why = f": {explanation}" if explanation else ""
        raise PlanNotDeployableError(f"plan {plan_id} is infeasible{why}; nothing to deploy")
    if stale:
        raise PlanNotDeployableError(
            f"plan {plan_id} is stale (its inventory snapshot is too old); re-plan first"
        )
    return workload_id


def _template(row: tuple[Any, ...]) -> TemplateSpec:
    stages = parse_stages(row[4])
    template = Template(
        template_id=row[0],
        model=row[1],
        phase=Phase(row[2]),
        workload_class=row[3],
        stages=stages,
        throughput_tokens_per_s=row[5],
        throughput_req_per_s=row[6],
        latency_s=row[7],
        max_batch=row[8],
        profile_backend=row[9],
        profile_backend_version=row[10],
    )
    return TemplateSpec(template, row[11], input_tokens=int(row[12]), output_tokens=int(row[13]))


def _templates(con: duckdb.DuckDBPyConnection, plan_id: str) -> tuple[TemplateSpec, ...]:
    rows = con.execute(
        f"SELECT DISTINCT {_TEMPLATE_COLUMNS} FROM plan_assignments a "
        "JOIN templates t USING (template_id) "
        "LEFT JOIN workload_classes w ON w.workload_class = t.workload_class "
        "WHERE a.plan_id = ? ORDER BY t.template_id",
        [plan_id],
    ).fetchall()
    missing = [r[0] for r in rows if r[12] is None]
    if missing:
        raise PlanNotDeployableError(f"templates {missing} name an unknown workload class")
    return tuple(_template(r) for r in rows)


def _slos(
    con: duckdb.DuckDBPyConnection, plan_id: str, workload_id: str | None
) -> tuple[ModelSlo, ...]:
    """Per model: the plan's workload SLOs, else those of its templates' workload class."""
    rows = con.execute(
        "SELECT a.model, min(coalesce(wl.ttft_slo_s, wc.ttft_slo_s)), "
        "min(coalesce(wl.tpot_slo_s, wc.tpot_slo_s)) FROM plan_assignments a "
        "JOIN templates t USING (template_id) "
        "LEFT JOIN workload_classes wc ON wc.workload_class = t.workload_class "
        "LEFT JOIN workloads wl ON wl.workload_id = ? AND wl.model = a.model "
        "WHERE a.plan_id = ? GROUP BY a.model ORDER BY a.model",
        [workload_id, plan_id],
    ).fetchall()
    return tuple(ModelSlo(m, float(t), float(p)) for m, t, p in rows if t is not None)


def load_render_input(con: duckdb.DuckDBPyConnection, plan_id: str) -> RenderInput:
    """Everything `deploy.render.render_deployment` needs for `plan_id`.

    Raises PlanNotFoundError / PlanNotDeployableError (infeasible, stale, unknown template).
    """
    workload_id = _check_plan(con, plan_id)
    assignments = tuple(
        AssignmentInput(t, m, Phase(ph), c, r, Pricing(p), int(n))
        for t, m, ph, c, r, p, n in con.execute(
            "SELECT template_id, model, phase, cloud, region, pricing, count FROM plan_assignments "
            "WHERE plan_id = ? ORDER BY model, region, template_id, pricing",
            [plan_id],
        ).fetchall()
    )
    templates = _templates(con, plan_id)
    unknown = sorted(
        {a.template_id for a in assignments} - {t.template.template_id for t in templates}
    )
    if unknown:
        raise PlanNotDeployableError(f"plan {plan_id} uses templates not in the catalog: {unknown}")
    rentals = tuple(
        RentalInput(c, r, i, Pricing(p), g, int(gc), int(n), float(price))
        for c, r, i, p, g, gc, n, price in con.execute(
            "SELECT cloud, region, instance_type, pricing, gpu_type, gpu_count, count, "
            "price_usd_per_hr FROM plan_rentals WHERE plan_id = ? "
            "ORDER BY cloud, region, instance_type, pricing",
            [plan_id],
        ).fetchall()
    )
    return RenderInput(plan_id, assignments, rentals, templates, _slos(con, plan_id, workload_id))


# Deployments -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredDeployment:
    deployment_id: str
    plan_id: str
    target: str
    status: str
    spec: DeploymentSpec
    external_ids: dict[str, str]  # unit id → id in the target, for units applied


def _stored(con: duckdb.DuckDBPyConnection, row: tuple[Any, ...]) -> StoredDeployment:
    deployment_id, plan_id, target, status = row
    units = con.execute(
        "SELECT unit_id, kind, spec, external_id FROM deployment_units "
        "WHERE deployment_id = ? ORDER BY unit_id",
        [deployment_id],
    ).fetchall()
    engines = tuple(engine_from_dict(json.loads(s)) for _, k, s, _ in units if k == "engine")
    routers = tuple(router_from_dict(json.loads(s)) for _, k, s, _ in units if k == "router")
    external = {u: e for u, _, _, e in units if e is not None}
    return StoredDeployment(
        deployment_id, plan_id, target, status, DeploymentSpec(plan_id, engines, routers), external
    )


def active_deployment(con: duckdb.DuckDBPyConnection, target: str) -> StoredDeployment | None:
    """The deployment now serving on `target` (status active), if any."""
    row = con.execute(
        "SELECT deployment_id, plan_id, target, status FROM deployments "
        "WHERE target = ? AND status = 'active' ORDER BY created_at DESC, deployment_id DESC "
        "LIMIT 1",
        [target],
    ).fetchone()
    return None if row is None else _stored(con, row)


def get_deployment(con: duckdb.DuckDBPyConnection, deployment_id: str) -> StoredDeployment:
    row = con.execute(
        "SELECT deployment_id, plan_id, target, status FROM deployments WHERE deployment_id = ?",
        [deployment_id],
    ).fetchone()
    if row is None:
        raise LookupError(f"deployment {deployment_id!r} not found")
    return _stored(con, row)


def resumable_deployment(con: duckdb.DuckDBPyConnection, plan_id: str, target: str) -> str | None:
    """An unfinished rollout of this plan on this target (interrupted, or stopped on failure)."""
    row = con.execute(
        "SELECT deployment_id FROM deployments WHERE plan_id = ? AND target = ? "
        "AND status IN ('pending', 'applying', 'failed') ORDER BY created_at DESC LIMIT 1",
        [plan_id, target],
    ).fetchone()
    return None if row is None else str(row[0])


def next_deployment_id(con: duckdb.DuckDBPyConnection, plan_id: str, target: str) -> str:
    row = con.execute(
        "SELECT count(*) FROM deployments WHERE plan_id = ? AND target = ?", [plan_id, target]
    ).fetchone()
    return f"{plan_id}.{target}.{int(row[0]) + 1 if row else 1}"


def insert_deployment(
    con: duckdb.DuckDBPyConnection,
    deployment_id: str,
    spec: DeploymentSpec,
    target: str,
    render_dir: str,
    previous_id: str | None,
) -> None:
    """A new deployment in status `pending` with all its units `pending`."""
    summary = {"previous_deployment_id": previous_id, "engines": len(spec.engines),
               "routers": len(spec.routers)}  # fmt: skip
    con.execute(
        "INSERT INTO deployments (deployment_id, plan_id, target, status, render_dir, spec) "
        "VALUES (?, ?, ?, 'pending', ?, ?)",
        [deployment_id, spec.plan_id, target, render_dir, json.dumps(summary)],
    )
    units: list[EngineUnit | RouterUnit] = [*spec.engines, *spec.routers]
    for unit in units:
        data = unit.to_dict()
        con.execute(
            "INSERT INTO deployment_units (deployment_id, unit_id, kind, model, region, role, "
            "template_id, instance_type, spec, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "'pending')",
            [
                deployment_id, unit.unit_id, data["kind"], unit.model, unit.region,
                data.get("role"), data.get("template_id"),
                data["stages"][0]["instance_type"] if "stages" in data else None,
                json.dumps(data, sort_keys=True),
            ],
        )  # fmt: skip


def deployment_previous_id(con: duckdb.DuckDBPyConnection, deployment_id: str) -> str | None:
    row = con.execute(
        "SELECT json_extract_string(spec, '$.previous_deployment_id') FROM deployments "
        "WHERE deployment_id = ?",
        [deployment_id],
    ).fetchone()
    return None if row is None else row[0]


def set_deployment_status(con: duckdb.DuckDBPyConnection, deployment_id: str, status: str) -> None:
    con.execute(
        "UPDATE deployments SET status = ? WHERE deployment_id = ?", [status, deployment_id]
    )


def set_unit(
    con: duckdb.DuckDBPyConnection,
    deployment_id: str,
    unit_id: str,
    status: str,
    external_id: str | None = None,
) -> None:
    """Set a unit's status, and its target id when given (kept otherwise)."""
    con.execute(
        "UPDATE deployment_units SET status = ?, external_id = coalesce(?, external_id) "
        "WHERE deployment_id = ? AND unit_id = ?",
        [status, external_id, deployment_id, unit_id],
    )


# Rollout events ----------------------------------------------------------------------------


def record_event(
    con: duckdb.DuckDBPyConnection,
    deployment_id: str,
    action_id: str,
    action: str,
    unit_id: str | None,
    status: str,
    message: str | None = None,
) -> None:
    """One step of one action (started | done | failed | skipped); re-recording replaces."""
    row = con.execute(
        "SELECT coalesce(max(seq), 0) + 1 FROM rollout_events WHERE deployment_id = ?",
        [deployment_id],
    ).fetchone()
    con.execute(
        "INSERT OR REPLACE INTO rollout_events (deployment_id, action_id, seq, action, unit_id, "
        "status, message) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [deployment_id, action_id, row[0] if row else 1, action, unit_id, status, message],
    )


def done_actions(con: duckdb.DuckDBPyConnection, deployment_id: str) -> set[str]:
    rows = con.execute(
        "SELECT action_id FROM rollout_events WHERE deployment_id = ? AND status = 'done'",
        [deployment_id],
    ).fetchall()
    return {r[0] for r in rows}


def rollout_events(
    con: duckdb.DuckDBPyConnection, deployment_id: str
) -> list[tuple[int, str, str, str | None, str, str | None]]:
    """(seq, action_id, action, unit_id, status, message) in order."""
    return [
        (int(s), a, k, u, st, m)
        for s, a, k, u, st, m in con.execute(
            "SELECT seq, action_id, action, unit_id, status, message FROM rollout_events "
            "WHERE deployment_id = ? ORDER BY seq",
            [deployment_id],
        ).fetchall()
    ]
