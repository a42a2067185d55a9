"""Reports as named tables of plain values: what CSV/Parquet, HTML and Prefect artifacts show."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from reports.cost import PlanReport
from reports.history import HistoryReport

Value = str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class Table:
    """Column names and rows of plain values (str, int, float, bool or None)."""

    name: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Value, ...], ...]

    def records(self) -> list[dict[str, Value]]:
        """Rows as dicts, e.g. for `prefect.artifacts.create_table_artifact(table=...)`."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def _plain(value: Any) -> Value:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def _table(name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    return Table(name, tuple(columns), tuple(tuple(_plain(v) for v in row) for row in rows))


def plan_summary_table(report: PlanReport) -> Table:
    """One row per headline figure of a plan report."""
    plan = report.plan
    snapshot = report.snapshot
    rows: list[tuple[str, Any]] = [
        ("plan_id", plan.plan_id),
        ("kind", plan.kind),
        ("mode", plan.mode),
        ("status", plan.status),
        ("created_at", plan.created_at),
        ("total_usd_per_hr", report.total_usd_per_hr),
        ("total_gpus", report.total_gpus),
        ("tokens_per_hr", report.tokens_per_hr),
        ("usd_per_million_tokens", report.usd_per_million_tokens),
        ("slo_attainment", report.slo_attainment),
        ("goodput_req_per_s", report.goodput_req_per_s),
        ("lp_bound", plan.lp_bound),
        ("gap", report.gap),
        ("solve_s", report.solve_s),
        ("snapshot_id", plan.snapshot_id),
        ("snapshot_taken_at", snapshot.taken_at if snapshot else None),
        ("snapshot_status", snapshot.status if snapshot else None),
        ("snapshot_age_s", report.snapshot_age_s),
        ("stale", report.stale),
    ]
    return _table("summary", ("metric", "value"), [(k, _plain(v)) for k, v in rows])


def plan_tables(report: PlanReport) -> dict[str, Table]:
    """All tables of a plan report, keyed by name (also the export file stem)."""
    breakdown = _table(
        "breakdown",
        ("dimension", "key", "usd_per_hr", "share"),
        [(b.dimension, b.key, b.usd_per_hr, b.share) for b in report.breakdown],
    )
    models = _table(
        "models",
        ("model", "usd_per_hr", "gpus", "tokens_per_hr", "usd_per_million_tokens"),
        [
            (m.model, m.usd_per_hr, m.gpus, m.tokens_per_hr, m.usd_per_million_tokens)
            for m in report.models
        ],
    )
    baselines = _table(
        "baselines",
        (
            "kind",
            "plan_id",
            "status",
            "usd_per_hr",
            "ratio",
            "savings_fraction",
            "savings_usd_per_hr",
        ),
        [
            (
                b.kind,
                b.plan_id,
                b.status,
                b.usd_per_hr,
                b.ratio,
                b.savings_fraction,
                b.savings_usd_per_hr,
            )
            for b in report.baselines
        ],
    )
    sims = _table(
        "simulations",
        ("plan_kind", "plan_id", "sim_run_id", "policy", "offered_load_req_per_s",
         "slo_attainment", "goodput_req_per_s"),
        [
            (s.plan_kind, s.plan_id, s.sim_run_id, s.policy, s.offered_load_req_per_s,
             s.slo_attainment, s.goodput_req_per_s)
            for s in report.sims
        ],
    )  # fmt: skip
    return {t.name: t for t in (plan_summary_table(report), breakdown, models, baselines, sims)}


def history_tables(report: HistoryReport) -> dict[str, Table]:
    """All tables of a history report, keyed by name (also the export file stem)."""
    kinds = sorted({k for r in report.replans for k in r.baseline_usd_per_hr})
    replans = _table(
        "replans",
        ("plan_id", "created_at", "usd_per_hr", *[f"{k}_usd_per_hr" for k in kinds],
         "slo_attainment", "goodput_req_per_s", "instances_added", "instances_removed"),
        [
            (r.plan_id, r.created_at, r.usd_per_hr,
             *[r.baseline_usd_per_hr.get(k) for k in kinds],
             r.slo_attainment, r.goodput_req_per_s, r.added, r.removed)
            for r in report.replans
        ],
    )  # fmt: skip
    days = _table(
        "days",
        ("day", "usd", "hours", "mean_usd_per_hr", "slo_attainment", "replans", "churn"),
        [
            (d.day, d.usd, d.hours, d.mean_usd_per_hr, d.slo_attainment, d.replans, d.churn)
            for d in report.days
        ],
    )
    savings = _table(
        "savings",
        ("baseline", "coral_usd", "baseline_usd", "saved_usd", "ratio", "hours"),
        [
            (s.kind, s.coral_usd, s.baseline_usd, s.saved_usd, s.ratio, s.hours)
            for s in report.savings
        ],
    )
    return {t.name: t for t in (replans, days, savings)}
