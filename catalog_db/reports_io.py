"""Reports at the catalog edge: read plan rows as frozen values, write `cost_reports` rows.

`build_plan_report` and `build_history_report` are what flows and `coral report` call: read
(one short read-only connection), compute (`reports.cost` / `reports.history`, pure), render
HTML and export CSV/Parquet under `out_dir/<report_id>/`, then write one `cost_reports` row and
its `cost_report_items` in ONE `write_transaction`.

Report ids are deterministic, so a rerun replaces its rows instead of adding new ones:
- plan report: `plan-<plan_id>`;
- history report: `history-<sha256 of the covered plan ids>[:16]` (the same plans give the same
  id whatever the exact `since`), or `history-empty-<since date>-<until date>` when none.

`cost_report_items` lines written (ratio column):
- plan report: dimensions model, gpu_type, region, pricing, cloud — `usd_per_hr` and, in
  `ratio`, the line's share of the plan's $/h; dimension baseline (key = kind) — the baseline's
  $/h and `ratio` = baseline $/h / Coral $/h (NULL when the baseline is infeasible).
- history report: dimension plan (key = plan_id, its $/h), day (key = ISO date, mean $/h,
  ratio = hour-weighted SLO attainment), baseline (key = kind, dollars saved in `usd_per_hr`
  divided by the hours compared, ratio = baseline $ / Coral $).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from catalog_db.connection import read_connection, write_transaction
from catalog_db.templates_io import parse_stages
from reports.cost import (
    BASELINE_KINDS,
    AssignmentRow,
    DemandRow,
    PlanInputs,
    PlanReport,
    PlanRow,
    RentalRow,
    SimRunRow,
    SnapshotRow,
    plan_report,
    plan_usd_per_hr,
)
from reports.export import export_tables
from reports.history import HistoryInputs, HistoryPlan, HistoryReport, history_report, parse_since
from reports.html import history_html, plan_html
from reports.markdown import history_markdown, plan_markdown
from reports.tables import Table, Value, history_tables, plan_tables

_PLAN_COLUMNS = (
    "plan_id, kind, parent_plan_id, mode, status, created_at, objective, cost_usd_per_hr, "
    "lp_bound, gap, solve_s, served_fraction, snapshot_id, workload_id, stale, snapshot_age_s"
)


@dataclass(frozen=True, slots=True)
class ReportItem:
    """One `cost_report_items` row."""

    dimension: str
    key: str
    usd_per_hr: float | None
    ratio: float | None


@dataclass(frozen=True, slots=True)
class CostReportRow:
    """One `cost_reports` row (created_at is the catalog's clock at write time)."""

    report_id: str
    plan_id: str | None
    period_start: datetime | None
    period_end: datetime | None
    total_usd_per_hr: float | None
    usd_per_million_tokens: float | None
    slo_attainment: float | None
    goodput_req_per_s: float | None
    snapshot_age_s: float | None
    html_path: str
    summary: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ReportResult:
    """What a flow needs after building a report: files, the row id and artifact content.

    `markdown` feeds `prefect.artifacts.create_markdown_artifact`; `table_rows` (a table's rows
    as dicts) feeds `create_table_artifact`; `tables` holds every table of the report.
    """

    report_id: str
    html_path: Path
    csv_paths: dict[str, Path]
    parquet_paths: dict[str, Path]
    markdown: str
    table_rows: list[dict[str, Value]]
    tables: dict[str, Table]
    empty: bool = False


# Reading --------------------------------------------------------------------------------------


_PLAN_FIELDS = tuple(c.strip() for c in _PLAN_COLUMNS.split(","))


def _plan_row(row: Sequence[Any]) -> PlanRow:
    values = dict(zip(_PLAN_FIELDS, row, strict=True))
    values["stale"] = bool(values["stale"])
    return PlanRow(**values)


def read_plan(con: duckdb.DuckDBPyConnection, plan_id: str) -> PlanRow:
    """One plan; KeyError when the catalog has no such plan."""
    row = con.execute(f"SELECT {_PLAN_COLUMNS} FROM plans WHERE plan_id = ?", [plan_id]).fetchone()
    if row is None:
        raise KeyError(f"no plan {plan_id!r} in the catalog; see `coral sql 'SELECT * FROM plans'`")
    return _plan_row(row)


def read_baselines(con: duckdb.DuckDBPyConnection, plan_ids: Sequence[str]) -> tuple[PlanRow, ...]:
    """The newest baseline plan of each kind whose parent is one of `plan_ids`."""
    rows = con.execute(
        f"SELECT {_PLAN_COLUMNS} FROM plans "
        "WHERE list_contains(?, parent_plan_id) AND list_contains(?, kind) "
        "QUALIFY row_number() OVER (PARTITION BY parent_plan_id, kind "
        "                           ORDER BY created_at DESC, plan_id DESC) = 1 "
        "ORDER BY parent_plan_id, kind",
        [list(plan_ids), list(BASELINE_KINDS)],
    ).fetchall()
    return tuple(_plan_row(r) for r in rows)


def read_rentals(
    con: duckdb.DuckDBPyConnection, plan_ids: Sequence[str]
) -> dict[str, tuple[RentalRow, ...]]:
    """Rented machines per plan."""
    rows = con.execute(
        "SELECT plan_id, cloud, region, instance_type, pricing, gpu_type, gpu_count, count, "
        "price_usd_per_hr FROM plan_rentals WHERE list_contains(?, plan_id) "
        "ORDER BY plan_id, cloud, region, instance_type, pricing",
        [list(plan_ids)],
    ).fetchall()
    result: dict[str, list[RentalRow]] = defaultdict(list)
    for row in rows:
        result[row[0]].append(RentalRow(*row[1:]))
    return {k: tuple(v) for k, v in result.items()}


def _template_gpus(con: duckdb.DuckDBPyConnection, template_ids: list[str]) -> dict[str, tuple]:
    """GPU vector per template: `template_gpus`, else summed from the `stages` JSON."""
    vectors: dict[str, dict[str, int]] = defaultdict(dict)
    for tid, gpu, n in con.execute(
        "SELECT template_id, gpu_type, gpu_count FROM template_gpus "
        "WHERE list_contains(?, template_id) ORDER BY template_id, gpu_type",
        [template_ids],
    ).fetchall():
        vectors[tid][gpu] = n
    missing = [t for t in template_ids if t not in vectors]
    for tid, stages in con.execute(
        "SELECT template_id, stages FROM templates WHERE list_contains(?, template_id)", [missing]
    ).fetchall():
        for stage in parse_stages(stages):
            vectors[tid][stage.gpu_type] = vectors[tid].get(stage.gpu_type, 0) + stage.tp
    return {tid: tuple(sorted(v.items())) for tid, v in vectors.items()}


def read_assignments(
    con: duckdb.DuckDBPyConnection, plan_ids: Sequence[str]
) -> dict[str, tuple[AssignmentRow, ...]]:
    """Template instances per plan, each with its template's GPU vector."""
    rows = con.execute(
        "SELECT plan_id, template_id, model, phase, cloud, region, pricing, count "
        "FROM plan_assignments WHERE list_contains(?, plan_id) "
        "ORDER BY plan_id, template_id, cloud, region, pricing",
        [list(plan_ids)],
    ).fetchall()
    vectors = _template_gpus(con, sorted({r[1] for r in rows}))
    result: dict[str, list[AssignmentRow]] = defaultdict(list)
    for plan_id, tid, model, phase, cloud, region, pricing, count in rows:
        result[plan_id].append(
            AssignmentRow(tid, model, phase, cloud, region, pricing, count, vectors.get(tid, ()))
        )
    return {k: tuple(v) for k, v in result.items()}


def read_demand(con: duckdb.DuckDBPyConnection, plan: PlanRow) -> tuple[DemandRow, ...]:
    """Served demand per model and region, with mean token counts of the plan's workload."""
    rows = con.execute(
        "SELECT d.model, d.region, d.pd_rate_req_per_s, d.coloc_rate_req_per_s, "
        "       w.mean_input_tokens, w.mean_output_tokens "
        "FROM plan_demand d LEFT JOIN workloads w ON w.workload_id = ? AND w.model = d.model "
        "WHERE d.plan_id = ? ORDER BY d.model, d.region",
        [plan.workload_id, plan.plan_id],
    ).fetchall()
    return tuple(DemandRow(*row) for row in rows)


def read_sim_runs(con: duckdb.DuckDBPyConnection, plan_ids: Sequence[str]) -> tuple[SimRunRow, ...]:
    """Every simulation of the given plans."""
    rows = con.execute(
        "SELECT sim_run_id, plan_id, policy, created_at, requests, simulated_s, slo_attainment, "
        "goodput_req_per_s FROM sim_runs WHERE list_contains(?, plan_id) "
        "ORDER BY plan_id, created_at, sim_run_id",
        [list(plan_ids)],
    ).fetchall()
    return tuple(SimRunRow(*row) for row in rows)


def read_snapshot(con: duckdb.DuckDBPyConnection, snapshot_id: str | None) -> SnapshotRow | None:
    row = con.execute(
        "SELECT snapshot_id, source, taken_at, status FROM inventory_snapshots "
        "WHERE snapshot_id = ?",
        [snapshot_id],
    ).fetchone()
    return SnapshotRow(*row) if row else None


def read_plan_inputs(con: duckdb.DuckDBPyConnection, plan_id: str) -> PlanInputs:
    """Everything the per-plan report needs, as frozen values."""
    plan = read_plan(con, plan_id)
    baselines = read_baselines(con, [plan_id])
    ids = [plan_id, *[b.plan_id for b in baselines]]
    rentals = read_rentals(con, ids)
    return PlanInputs(
        plan=plan,
        rentals=rentals.get(plan_id, ()),
        assignments=read_assignments(con, [plan_id]).get(plan_id, ()),
        demand=read_demand(con, plan),
        baselines=baselines,
        baseline_rentals={b.plan_id: rentals.get(b.plan_id, ()) for b in baselines},
        sim_runs=read_sim_runs(con, ids),
        snapshot=read_snapshot(con, plan.snapshot_id),
    )


def _coral_plans(
    con: duckdb.DuckDBPyConnection, since: datetime, until: datetime
) -> tuple[PlanRow | None, tuple[PlanRow, ...]]:
    """(the last feasible Coral plan before `since`, those created in [since, until])."""
    where = "kind = 'coral' AND status <> 'infeasible'"
    prior = con.execute(
        f"SELECT {_PLAN_COLUMNS} FROM plans WHERE {where} AND created_at < ? "
        "ORDER BY created_at DESC, plan_id DESC LIMIT 1",
        [since],
    ).fetchone()
    rows = con.execute(
        f"SELECT {_PLAN_COLUMNS} FROM plans WHERE {where} AND created_at >= ? AND created_at <= ? "
        "ORDER BY created_at, plan_id",
        [since, until],
    ).fetchall()
    return (_plan_row(prior) if prior else None), tuple(_plan_row(r) for r in rows)


def _history_plans(
    con: duckdb.DuckDBPyConnection, plans: Sequence[PlanRow]
) -> dict[str, HistoryPlan]:
    """HistoryPlan per plan id; plans whose cost is unknown are left out."""
    ids = [p.plan_id for p in plans]
    baselines = read_baselines(con, ids)
    rentals = read_rentals(con, ids + [b.plan_id for b in baselines])
    assignments = read_assignments(con, ids)
    latest_sim = {r.plan_id: r for r in read_sim_runs(con, ids)}  # ordered: last is newest
    base_cost: dict[str, dict[str, float]] = defaultdict(dict)
    for b in baselines:
        usd = plan_usd_per_hr(b, rentals.get(b.plan_id, ()))
        if b.status != "infeasible" and usd is not None and b.parent_plan_id is not None:
            base_cost[b.parent_plan_id][b.kind] = usd
    result = {}
    for plan in plans:
        usd = plan_usd_per_hr(plan, rentals.get(plan.plan_id, ()))
        if usd is None or plan.created_at is None:
            continue
        by_gpu: dict[str, float] = defaultdict(float)
        for r in rentals.get(plan.plan_id, ()):
            by_gpu[r.gpu_type] += r.usd_per_hr
        sim = latest_sim.get(plan.plan_id)
        instances = {
            (a.template_id, a.cloud, a.region, a.pricing): a.count
            for a in assignments.get(plan.plan_id, ())
        }
        result[plan.plan_id] = HistoryPlan(
            plan.plan_id, plan.created_at, usd, dict(by_gpu), base_cost.get(plan.plan_id, {}),
            sim.slo_attainment if sim else None, sim.goodput_req_per_s if sim else None, instances,
        )  # fmt: skip
    return result


def read_history_inputs(
    con: duckdb.DuckDBPyConnection, since: datetime, until: datetime
) -> HistoryInputs:
    """The feasible Coral plans of [since, until] plus the one in effect at `since`."""
    prior, window = _coral_plans(con, since, until)
    plans = _history_plans(con, ([prior] if prior else []) + list(window))
    return HistoryInputs(
        since=since,
        until=until,
        prior=plans.get(prior.plan_id) if prior else None,
        plans=tuple(plans[p.plan_id] for p in window if p.plan_id in plans),
    )


def catalog_now(con: duckdb.DuckDBPyConnection) -> datetime:
    """The catalog's clock, in the same (naive) time zone as its `created_at` defaults."""
    row = con.execute("SELECT current_timestamp::TIMESTAMP").fetchone()
    assert row is not None  # a constant SELECT always returns one row
    return row[0]


# Writing --------------------------------------------------------------------------------------


def write_cost_report(
    con: duckdb.DuckDBPyConnection, report: CostReportRow, items: Sequence[ReportItem]
) -> None:
    """Replace the report's row and items (call inside one `write_transaction`)."""
    con.execute("DELETE FROM cost_report_items WHERE report_id = ?", [report.report_id])
    con.execute("DELETE FROM cost_reports WHERE report_id = ?", [report.report_id])
    con.execute(
        "INSERT INTO cost_reports (report_id, plan_id, period_start, period_end, total_usd_per_hr, "
        "usd_per_million_tokens, slo_attainment, goodput_req_per_s, snapshot_age_s, html_path, "
        "summary) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            report.report_id, report.plan_id, report.period_start, report.period_end,
            report.total_usd_per_hr, report.usd_per_million_tokens, report.slo_attainment,
            report.goodput_req_per_s, report.snapshot_age_s, report.html_path,
            json.dumps(report.summary, default=str, sort_keys=True),
        ],
    )  # fmt: skip
    if items:
        con.executemany(
            "INSERT INTO cost_report_items (report_id, dimension, key, usd_per_hr, ratio) "
            "VALUES (?, ?, ?, ?, ?)",
            [[report.report_id, i.dimension, i.key, i.usd_per_hr, i.ratio] for i in items],
        )


# Plan report -------------------------------------------------------------------------------------


def plan_report_id(plan_id: str) -> str:
    return f"plan-{plan_id}"


def plan_items(report: PlanReport) -> list[ReportItem]:
    """Breakdown lines (ratio = share of $/h) and baseline lines (ratio = baseline / Coral)."""
    items = [ReportItem(b.dimension, b.key, b.usd_per_hr, b.share) for b in report.breakdown]
    total = report.total_usd_per_hr
    items += [
        ReportItem("model", m.model, m.usd_per_hr, m.usd_per_hr / total if total else None)
        for m in report.models
    ]
    items += [ReportItem("baseline", b.kind, b.usd_per_hr, b.ratio) for b in report.baselines]
    return items


def _plan_summary(report: PlanReport) -> dict[str, Any]:
    return {
        "kind": report.plan.kind,
        "status": report.plan.status,
        "total_gpus": report.total_gpus,
        "tokens_per_hr": report.tokens_per_hr,
        "gap": report.gap,
        "lp_bound": report.plan.lp_bound,
        "solve_s": report.solve_s,
        "stale": report.stale,
        "snapshot_id": report.plan.snapshot_id,
        "usd_per_million_tokens_by_model": {
            m.model: m.usd_per_million_tokens for m in report.models
        },
        "baseline_ratios": {b.kind: b.ratio for b in report.baselines},
        "sim_runs": len(report.sims),
    }


def _safe_dir_name(report_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", report_id)


def _write_files(
    out_dir: Path, report_id: str, html: str, tables: dict[str, Table]
) -> tuple[Path, dict[str, Path], dict[str, Path]]:
    folder = Path(out_dir) / _safe_dir_name(report_id)
    folder.mkdir(parents=True, exist_ok=True)
    html_path = (folder / "report.html").resolve()
    html_path.write_text(html, encoding="utf-8")
    files = export_tables(tables, folder)
    return html_path, dict(files.csv), dict(files.parquet)


def build_plan_report(
    db_path: Path | str, plan_id: str, out_dir: Path | str, timeout_s: float = 60.0
) -> ReportResult:
    """Compute, render, export and record the cost report of one plan.

    Raises KeyError when the plan does not exist. Files land in `out_dir/plan-<plan_id>/`.
    """
    with read_connection(db_path, timeout_s) as con:
        inputs = read_plan_inputs(con, plan_id)
    report = plan_report(inputs)
    tables = plan_tables(report)
    report_id = plan_report_id(plan_id)
    html_path, csvs, parquets = _write_files(
        Path(out_dir), report_id, plan_html(report, tables), tables
    )
    row = CostReportRow(
        report_id, plan_id, report.plan.created_at, None, report.total_usd_per_hr,
        report.usd_per_million_tokens, report.slo_attainment, report.goodput_req_per_s,
        report.snapshot_age_s, str(html_path), _plan_summary(report),
    )  # fmt: skip
    with write_transaction(db_path, timeout_s) as con:
        write_cost_report(con, row, plan_items(report))
    return ReportResult(
        report_id, html_path, csvs, parquets, plan_markdown(report, tables),
        tables["models"].records(), tables,
    )  # fmt: skip


# History report ----------------------------------------------------------------------------------


def history_report_id(inputs: HistoryInputs) -> str:
    ids = ([inputs.prior.plan_id] if inputs.prior else []) + [p.plan_id for p in inputs.plans]
    if not ids:
        return f"history-empty-{inputs.since.date()}-{inputs.until.date()}"
    return "history-" + hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]


def history_items(report: HistoryReport) -> list[ReportItem]:
    """Per-replan $/h, per-day mean $/h (ratio = attainment), savings per baseline kind."""
    items = [ReportItem("plan", r.plan_id, r.usd_per_hr, None) for r in report.replans]
    items += [
        ReportItem("day", d.day.isoformat(), d.mean_usd_per_hr, d.slo_attainment)
        for d in report.days
    ]
    items += [
        ReportItem("baseline", s.kind, s.saved_usd / s.hours if s.hours else None, s.ratio)
        for s in report.savings
    ]
    return items


def _history_summary(report: HistoryReport) -> dict[str, Any]:
    return {
        "empty": report.empty,
        "replans": len(report.replans),
        "total_usd": report.total_usd,
        "saved_usd": {s.kind: s.saved_usd for s in report.savings},
        "ratio": {s.kind: s.ratio for s in report.savings},
        "churn": sum((r.added or 0) + (r.removed or 0) for r in report.replans),
    }


def build_history_report(
    db_path: Path | str,
    since: datetime | timedelta | str,
    out_dir: Path | str,
    until: datetime | None = None,
    timeout_s: float = 60.0,
) -> ReportResult:
    """Compute, render, export and record the over-time report of [since, until].

    `since` is a timestamp, a timedelta before `until`, or text such as '7d', '12h', '2w' or an
    ISO date. `until` defaults to the catalog's clock. An empty period yields a report that says so.
    """
    with read_connection(db_path, timeout_s) as con:
        end = until or catalog_now(con)
        start = parse_since(since, end)
        inputs = read_history_inputs(con, start, end)
    report = history_report(inputs)
    tables = history_tables(report)
    report_id = history_report_id(inputs)
    html_path, csvs, parquets = _write_files(
        Path(out_dir), report_id, history_html(report, tables), tables
    )
    row = CostReportRow(
        report_id, None, start, end, report.mean_usd_per_hr, None, report.slo_attainment, None,
        None, str(html_path), _history_summary(report),
    )  # fmt: skip
    with write_transaction(db_path, timeout_s) as con:
        write_cost_report(con, row, history_items(report))
    return ReportResult(
        report_id, html_path, csvs, parquets, history_markdown(report, tables),
        tables["days"].records(), tables, empty=report.empty,
    )  # fmt: skip
